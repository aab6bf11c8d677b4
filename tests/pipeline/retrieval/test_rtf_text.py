"""Rich Text Format files read as their paragraphs, headings and table rows, without markup or hidden parts."""

import contextlib
import random
import time

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import read_document
from pipeline.retrieval.html_text import html_to_text
from pipeline.retrieval.rtf_text import rtf_text

TEXTEDIT = rb"""{\rtf1\ansi\ansicpg1252\cocoartf2761
\cocoatextscaling0\cocoaplatform0{\fonttbl\f0\fswiss\fcharset0 Helvetica;}
{\colortbl;\red255\green255\blue255;}
{\*\expandedcolortbl;;}
{\info{\title Refund policy}{\author Ann Lee}{\creatim\yr2024\mo3\dy1}}
\paperw11900\paperh16840\margl1440\margr1440\vieww11520\viewh8400\viewkind0
\pard\tx566\tx1133\pardirnatural\partightenfactor0

\f0\b\fs24 \cf0 Refunds\
\b0 Caf\'e9 orders can be refunded within 14 days \'96 ask at the counter.\
Don\u8217 't forget the receipt{\*\footnote never shown}.}"""

# as pandoc writes it (`pandoc -s doc.md -t rtf`): headings by outline level, tables with a paragraph per cell
PANDOC = rb"""{\rtf1\ansi\deff0{\fonttbl{\f0 \fswiss Helvetica;}{\f1 \fmodern Courier;}}
{\colortbl;\red255\green0\blue0;\red0\green0\blue255;}
\widowctrl\hyphauto
{\pard \ql \f0 \sa180 \li0 \fi0 \outlinelevel1 \b \fs32 Exchanges\par}
{\pard \ql \f0 \sa0 \li360 \fi-360 \bullet \tx360\tab Or write to {\field{\*\fldinst{HYPERLINK "https://example.com"}}
{\fldrslt{\ul
support
}}}
\sa180\par}
{
\trowd \trgaph120
\clbrdrb\brdrs\cellx4320\clbrdrb\brdrs\cellx8640
\trkeep\intbl
{
{{\pard\intbl \ql \f0 \sa0 \li0 \fi0 Plan\par}
\cell}
{{\pard\intbl \ql \f0 \sa0 \li0 \fi0 Price\par}
\cell}
}
\intbl\row}
{
\trowd \trgaph120
\cellx4320\cellx8640
\trkeep\intbl
{
{{\pard\intbl \ql \f0 \sa0 \li0 \fi0 Team\par}
\cell}
{{\pard\intbl \ql \f0 \sa0 \li0 \fi0 12 \u8364 ?\par}
\cell}
}
\intbl\row}
{\pard \ql \f0 \sa180 \li720 \fi0 Quoted: \u8220"smart quotes\u8221" and
 \u1055?\u1088?\u1080?\u1074?\u1077?\u1090?.\par}
{\header Company confidential\par}{\pict\pngblip 89504e470d0a}
}"""


def test_a_textedit_document_reads_as_its_paragraphs_and_its_title(tmp_path):
    path = tmp_path / "policy.rtf"
    path.write_bytes(TEXTEDIT)
    assert read_document(path) == ("Refund policy", (
        "Refunds\n\nCaf\u00e9 orders can be refunded within 14 days \u2013 ask at the counter.\n\n"
        "Don\u2019t forget the receipt."))  # the \u character's fallback ("'") skipped, the footnote left out


def test_headings_lists_links_and_tables_read_as_a_reader_sees_them():
    assert rtf_text(PANDOC) == ("", (
        "## Exchanges\n\n\u2022 Or write to support\n\nPlan | Price\n\nTeam | 12 \u20ac\n\n"
        "Quoted: \u201csmart quotes\u201d and \u041f\u0440\u0438\u0432\u0435\u0442."))


# an HTML message as Outlook stores its body ([MS-OXRTFEX]): the page's markup in htmltag groups, its text between
# them, and RTF's own rendering of it marked \htmlrtf ... \htmlrtf0
FROM_HTML = rb"""{\rtf1\ansi\ansicpg1252\fromhtml1 \deff0{\fonttbl{\f0\fswiss Arial;}}
{\*\htmltag19 <html>}{\*\htmltag34 <head>}{\*\htmltag41 <title>Refunds</title>}{\*\htmltag42 </head>}
{\*\htmltag50 <body>}\htmlrtf {\htmlrtf0
{\*\htmltag64 <h2>}\htmlrtf {\b\fs32 \htmlrtf0 Refund window\htmlrtf }\htmlrtf0 {\*\htmltag72 </h2>}
\htmlrtf\par\htmlrtf0
{\*\htmltag64 <p>}The refund window is 30 days; caf\'e9 vouchers\uc1\u8212?none.{\*\htmltag72 </p>}\htmlrtf\par\htmlrtf0
{\*\htmltag64 <table>}{\*\htmltag64 <tr>}{\*\htmltag64 <th>}Zone{\*\htmltag72 </th>}{\*\htmltag64 <th>}Days
{\*\htmltag72 </th>}{\*\htmltag72 </tr>}{\*\htmltag64 <tr>}{\*\htmltag64 <td>}EU\htmlrtf\cell\htmlrtf0
{\*\htmltag72 </td>}{\*\htmltag64 <td>}3-5{\*\htmltag72 </td>}{\*\htmltag72 </tr>}{\*\htmltag72 </table>}
\htmlrtf This rendering of the page is RTF's own.\par\htmlrtf0 {\*\mhtmltag84 <img src="cid:logo">}
{\*\htmltag58 </body>}{\*\htmltag27 </html>}\htmlrtf }\htmlrtf0 }"""
THE_PAGE = ("<html><head><title>Refunds</title></head><body><h2>Refund window</h2><p>The refund window is 30 days; "
            "caf\u00e9 vouchers\u2014none.</p><table><tr><th>Zone</th><th>Days</th></tr><tr><td>EU</td><td>3-5</td>"
            "</tr></table></body></html>")


def test_rtf_carrying_an_html_page_reads_as_the_page():
    assert rtf_text(FROM_HTML) == html_to_text(THE_PAGE) == (
        "Refunds", "## Refund window\n\nThe refund window is 30 days; caf\u00e9 vouchers\u2014none.\n\nZone | Days\n\n"
        "Zone: EU | Days: 3-5")


def test_code_pages_unicode_fallbacks_and_binary_data():
    russian = rb"{\rtf1\ansi\ansicpg1251 \'cf\'f0\'e8\'e2\'e5\'f2\par\uc2\u1055\'cf\'cf x\par\bin4 {{{{ tail\par}"
    assert rtf_text(russian) == ("", "\u041f\u0440\u0438\u0432\u0435\u0442\n\n\u041f x\n\ntail")
    emoji = rb"{\rtf1 Smile \u-10179?\u-8704? and a lone half \u-10179? end}"  # UTF-16 halves, as Word writes them
    assert rtf_text(emoji) == ("", "Smile \U0001f600 and a lone half \ufffd end")
    symbols = rb"{\rtf1 a\~b c\-d \{x\} e\emdash f\tab g\line h}"
    assert rtf_text(symbols) == ("", "a b cd {x} e\u2014f g\nh")  # a non-breaking space is a space


@pytest.mark.parametrize("data", [b"plain text", b"", b"{\\rtx1 nope}", b"PK\x03\x04"])
def test_a_file_that_is_not_rtf_is_an_error(tmp_path, data):
    path = tmp_path / "letter.rtf"
    path.write_bytes(data)
    with pytest.raises(DataError, match=r"letter\.rtf: not an RTF file"):
        read_document(path)


def test_crafted_nesting_and_size_read_in_bounded_time():
    with pytest.raises(DataError, match="groups nested more than 2000 deep"):
        rtf_text(b"{\\rtf1 " + b"{" * 100_000)
    start = time.perf_counter()
    text = rtf_text(b"{\\rtf1 " + b"\\par word \\'e9\\u8217? " * 100_000 + b"}")[1]
    assert text.count("word") == 100_000 and time.perf_counter() - start < 10
    rng = random.Random(0)
    for copy in range(300):  # damaged copies: text or an error naming what is wrong, nothing else
        data = bytearray(PANDOC if copy % 2 else FROM_HTML)
        for _ in range(rng.randint(1, 20)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        with contextlib.suppress(DataError):
            rtf_text(bytes(data))


def test_rows_below_a_header_row_read_with_their_column_names():
    word = (rb"{\rtf1\ansi\trowd\trhdr\cellx1000\cellx2000 Plan\cell Price\cell\row"
            rb"\trowd\cellx1000\cellx2000 Team\cell 12 \u8364?\cell\row\trowd Free\cell\cell\row After.\par}")
    assert rtf_text(word) == ("", "Plan | Price\n\nPlan: Team | Price: 12 \u20ac\n\nPlan: Free\n\nAfter.")


# as LibreOffice 7.4 writes headings (`soffice --convert-to rtf`): styles named "Heading N" without an outline level;
# Word repeats a heading's \outlinelevel after its style, which must not make it a level deeper
STYLED = rb"""{\rtf1\ansi\deff0\adeflang1025
{\fonttbl{\f0\froman\fprq2\fcharset0 Times New Roman;}}
{\stylesheet{\s0\snext0\widctlpar\hyphpar0\ltrpar\cf0\kerning1\dbch\af5\langfe2052 Normal;}
{\s1\sbasedon0\snext0\rtlch\af10\afs28\ab \ltrch\hich\af6\loch\sl276\slmult1\keepn\b Heading 1;}
{\s2\sbasedon1\snext0{\*\keycode \shift\ctrl 2}\b Heading 2;}
{\s3\ql\outlinelevel2\sbasedon0 \snext0 \slink15 \sqformat \spriority9 \u220?berschrift 3;}
{\*\cs15\additive\b\f1 Heading 1 Char;}
{\s39\sbasedon0\snext0 toc 1;}
{\s40\sbasedon0 Title;}
}
\pard\plain \s40 Refund guide\par
\pard\plain \s1\rtlch\af10\afs28\ab \ltrch\hich\af6\loch\keepn\b {\loch Returns}\par
\pard\plain \s0 Bring the receipt.\par
\pard\plain \s2 By post\par
\pard\plain \s3\outlinelevel2 Kosten\par
\pard\plain \s39 Returns ........ 1\par
\pard\plain \s1\outlinelevel0 Exchanges\par
{\*\cs15 not a paragraph style}\par
}"""


def test_heading_styles_read_as_markdown_headings_once():
    assert rtf_text(STYLED) == ("", (
        "# Refund guide\n\n# Returns\n\nBring the receipt.\n\n## By post\n\n### Kosten\n\nReturns ........ 1\n\n"
        "# Exchanges"))


# a text box as Word writes it (a shape whose \shptxt holds its paragraphs), one in a page header (left out), and a
# picture shape
TEXT_BOXES = rb"""{\rtf1\ansi\deff0{\fonttbl{\f0 Calibri;}}
{\header \pard Confidential{\shp{\*\shpinst\shpleft0{\sp{\sn shapeType}{\sv 202}}{\shptxt \pard Draft only\par}}}\par}
\pard Every store takes part.{\shp{\*\shpinst\shpleft0\shptop0\shpright3000\shpbottom1000{\sp{\sn shapeType}
{\sv 202}}{\sp{\sn fFilled}{\sv 1}}{\shptxt \pard\plain \s0 Returns desk open 9 to 5.\par \pard Call 555-0100.\par }}
{\shprslt{\*\do\dobxcolumn{\dptxbx{\dptxbxtext Returns desk open 9 to 5.}}}}}\par
\pard Prices include tax.{\shp{\*\shpinst{\sp{\sn pib}{\sv {\pict\pngblip 89504e47}}}}}\par
}"""


def test_text_boxes_read_apart_from_their_paragraph_and_once():
    assert rtf_text(TEXT_BOXES)[1] == ("Every store takes part.\n\nReturns desk open 9 to 5.\n\nCall 555-0100.\n\n"
                                       "Prices include tax.")


# list items as Word writes them: the label it shows in a {\listtext} group (a Symbol-font bullet, Courier's "o" for
# a second level, a number), Word 95's {\pntext}, and LibreOffice's private-use bullet
LISTS = rb"""{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0 Calibri;}{\f2 Courier New;}{\f3 Symbol;}}
{\listtext\pard\plain\f3\fs24 \'b7\tab}\pard\plain \ls1\ilvl0 Bring the receipt.\par
{\listtext\pard\plain\f2\fs24 o\tab}\pard\plain \ls1\ilvl1 Keep the box.\par
\pard\plain \ls2\ilvl0{\listtext\pard\plain 1.\tab}Pack the item.\par
{\listtext\pard\plain 2.\tab}Print the label.\par
{\pntext\f3\'b7\tab}Old-style item.\par
{\listtext\pard\plain  \u61623\'3f\tab}LibreOffice's bullet.\par
\pard Plain paragraph.\par
}"""


def test_list_items_read_with_the_labels_word_shows():
    assert rtf_text(LISTS)[1].split("\n\n") == [
        "- Bring the receipt.", "- Keep the box.", "1. Pack the item.", "2. Print the label.", "- Old-style item.",
        "- LibreOffice's bullet.", "Plain paragraph."]
