"""HTML pages are read as their content's paragraphs: no site furniture, headings apart from sentences."""

import time

import pytest

from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.html_text import html_to_text
from pipeline.retrieval.strips import sentence_strips

PAGE = """<!doctype html><html><head><title> Shipping
 help </title><style>p {color: red}</style><script>var tracking = "x";</script></head>
<body><header><a href="/">Logo</a> Home | Products | Contact</header>
<nav><ul><li>Orders</li><li>Returns</li></ul></nav>
<div id="cookies" role="banner">We use cookies. Accept all?</div>
<main><header><h1>Shipping   times</h1></header>
<p>Orders ship within 2 business days.
   Express delivery takes 1 day in the EU.</p>
<p>International shipping to the US takes 5&ndash;7 business days.</p>
<aside>Related: our returns policy</aside><h2> </h2>
<table><tr><th>Zone</th><th>Days</th></tr><tr><td>EU</td><td>1-2</td></tr></table>
<pre>curl -X GET /orders
    --header "Accept: json"</pre>
<span hidden>internal note</span><div aria-hidden="true">decoration</div>
</main><footer>(c) 2026 Example Ltd. All rights reserved.</footer></body></html>"""


def test_a_page_keeps_its_content_and_drops_its_furniture():
    title, text = html_to_text(PAGE)
    assert title == "Shipping help"
    assert text.split("\n\n") == [
        "# Shipping times",  # a heading, written as Markdown
        "Orders ship within 2 business days. Express delivery takes 1 day in the EU.",
        "International shipping to the US takes 5\u20137 business days.",
        "Zone | Days", "Zone: EU | Days: 1-2",  # a row under a header row is led by its column names
        '```\ncurl -X GET /orders\n    --header "Accept: json"\n```',  # preformatted text is code, fenced
    ]
    for furniture in ("Logo", "Products", "Returns", "cookies", "Related", "rights reserved", "tracking", "color",
                      "internal note", "decoration"):
        assert furniture not in text


def test_a_heading_is_never_run_into_the_sentence_after_it(tmp_path):
    page = tmp_path / "page.html"
    page.write_text(PAGE, encoding="utf-8")
    title, text = read_document(page)
    strips = [s for chunk in chunk_text(text) for s in sentence_strips(chunk)]
    assert title == "Shipping help"
    assert strips[:3] == ["Orders ship within 2 business days.", "Express delivery takes 1 day in the EU.",
                          "International shipping to the US takes 5\u20137 business days."]


def test_furniture_that_never_closes_keeps_the_rest_of_the_page():
    # broken markup: without </nav> everything after it would go with the navigation
    _, text = html_to_text("<nav>Menu <p>Refunds are granted within 14 days.<p>Contact support.")
    assert "Refunds are granted within 14 days." in text and "Contact support." in text
    _, text = html_to_text("<head><title>T</title><body><p>Body text here.</p>")  # </head> left out, as HTML allows
    assert text == "Body text here."


def test_nested_elements_of_the_same_name_end_the_right_one():
    _, text = html_to_text('<div role="navigation"><div>Menu</div> more menu</div><div><p>Content.</p></div>'
                           '<nav><span hidden><nav>inner</nav></span> tail</nav><p>After.</p>')
    assert text.split("\n\n") == ["Content.", "After."]


def test_a_line_break_does_not_end_a_paragraph():
    _, text = html_to_text("<p>Refunds are granted<br>within 14 days.<br/>Ask our support team.</p><p>Next.</p>")
    assert text == "Refunds are granted\nwithin 14 days.\nAsk our support team.\n\nNext."
    assert sentence_strips(text) == ["Refunds are granted within 14 days.", "Ask our support team."]


def test_a_picture_reads_as_its_alt_text_where_it_stands():
    _, text = html_to_text('<p>Click the <img src="g.svg" alt="gear"> icon, then<img alt="Save">.</p>'
                           '<figure><img src="f.png" alt="Refund flow: request, review,\n payout in 5 days">'
                           "<figcaption>Figure 1</figcaption></figure>")
    assert text.split("\n\n") == ["Click the gear icon, then Save .", "Refund flow: request, review, payout in 5 days",
                                  "Figure 1"]
    _, text = html_to_text('<p><img src="chart.png" width="24" height="300" alt="Sales by month"></p>')
    assert text == "Sales by month"  # only an image small both ways is an icon


@pytest.mark.parametrize("img", ['<img src="a.png" alt="IMG_0042.JPG">', '<img src="a.png" alt="">', '<img src="a">',
                                 '<img alt="spacer" role="presentation">', '<img alt="divider" role=none>',
                                 '<img alt="tracking pixel" hidden>', '<img alt="chart" aria-hidden="true">',
                                 '<nav><img alt="Shop"></nav>', '<img src="up.png" width="24" height="24px" alt="Up">',
                                 '<img src="w3c.png" alt="W3C Logo">', '<img alt="Build status badge">'])
def test_pictures_that_say_nothing_or_are_hidden_add_no_text(img):
    _, text = html_to_text(f"<p>Before {img} after.</p>")
    assert text == "Before after."


def test_alt_text_that_starts_like_a_code_fence_opens_no_code_block():
    _, text = html_to_text('<p><img alt="```python"></p><p>Refunds take 14 days.</p>')
    assert text.split("\n\n") == ["\\```python", "Refunds take 14 days."]


def test_spaces_around_inline_elements_collapse_to_one_as_a_browser_shows_them():
    _, text = html_to_text("<p>Orders <b> ship </b> <i>fast</i> .</p>")
    assert text == "Orders ship fast ."


def test_rows_under_a_header_row_read_with_their_column_names():
    page = ("<table><thead><tr><th>Plan</th><th>Monthly price</th><th>Seats</th></tr></thead>"
            "<tbody><tr><td>Team</td><td>12 \u20ac</td><td>10</td></tr><tr><td>Business<td><td>50</table>"
            "<p>Between.</p>"
            "<table><tr><th>Weight</th><td>1.1 kg</td></tr><tr><th>Screen</th><td>13 inch</td></tr></table>"
            "<table><tr><td>a</td><td>b</td></tr></table>"
            "<table><tr><th>A column name as long as a sentence would be</th><th>b</th></tr><tr><td>x<td>y</table>"
            "<table><tr><td><p>Cell with</p><p>blocks</p></td><td>two</td></tr></table>")
    assert html_to_text(page)[1].split("\n\n") == [
        "Plan | Monthly price | Seats", "Plan: Team | Monthly price: 12 \u20ac | Seats: 10",
        "Plan: Business | Seats: 50",  # an empty cell is left out, with its name
        "Between.",
        "Weight | 1.1 kg", "Screen | 13 inch",  # row headers (a <th> beside <td>s) name no columns
        "a | b",  # no header row
        "A column name as long as a sentence would be | b", "x | y",  # a sentence is no column name
        "Cell with blocks | two"]  # a cell's own blocks stay in its row


def test_a_page_without_markup_or_text_reads_as_empty():
    assert html_to_text("") == ("", "")
    assert html_to_text("<script>only()</script>") == ("", "")
    assert html_to_text("plain &amp; simple") == ("", "plain & simple")


def test_a_page_in_its_declared_charset_is_read_and_an_undeclared_one_is_an_error(tmp_path):
    from models import DataError

    page = tmp_path / "cafe.html"
    page.write_bytes('<html><head><meta charset="windows-1252"><title>Café</title></head>'
                     '<body><p>Prix : 5 € – très bien.</p></body></html>'.encode("cp1252"))
    assert read_document(page) == ("Café", "Prix : 5 € – très bien.")
    bare = tmp_path / "bare.html"
    bare.write_bytes("<p>café</p>".encode("latin-1"))
    with pytest.raises(DataError, match=r"bare\.html: not UTF-8 .*declare its charset"):
        read_document(bare)
    wrong = tmp_path / "wrong.html"
    wrong.write_bytes(b'<meta charset="no-such-charset"><p>caf\xe9</p>')
    with pytest.raises(DataError, match="declared charset 'no-such-charset'"):
        read_document(wrong)


@pytest.mark.parametrize("opener", ["<a ", "</", "<!-- ", "a<!", "<?", "<a", '<a x="', "<a x='<b y=\"", "<a  b  ",
                                    "<a\t/"])
def test_stray_openers_are_text_read_in_linear_time(opener):
    """The standard library's parser takes quadratic time over tags that never close (a 60 KB run of "<a " took
    39 s): a "<" that cannot close before the next one is read as text first."""
    page = "<p>" + opener * (60_000 // len(opener)) + "</p><p>After.</p>"
    start = time.perf_counter()
    _, text = html_to_text(page)
    assert time.perf_counter() - start < 5
    assert text.endswith("After.") and opener.strip()[:2] in text


def test_a_stray_less_than_sign_is_text_and_real_tags_and_comments_still_read():
    page = ('<p>if x<y and 3 < 4 <!-- hidden <b>note</b> --><b>bold</b> <a href="u" title="a>b">link</a></p>'
            '<script>if (a<b && c>d) run()</script><p>Unclosed <!-- comment stays</p>')
    assert html_to_text(page)[1] == 'if x<y and 3 < 4 bold link\n\nUnclosed <!-- comment stays'


def test_quoted_attribute_values_may_hold_angle_brackets():
    image = "data:image/svg+xml;utf8,<svg xmlns='http://www.w3.org/2000/svg'><rect/></svg>"
    page = (f'<!DOCTYPE html><p><a title="x < y" href=\'/q?a<b\'>Compare</a> two values.</p>'
            f'<p><img alt="chart" src="{image}">Chart<br/>below<input disabled class=wide>.</p>'
            '<p><b class="a"id="b">Glued</b> attributes, <i >spaced</i > tags.</p>')
    assert html_to_text(page)[1] == "Compare two values.\n\nchart Chart\nbelow.\n\nGlued attributes, spaced tags."


def test_a_pre_whose_opening_went_with_a_misnested_element_left_out_is_plain_text():
    for page in ("<p>a</p><nav><pre>code here</nav> more</pre><p>Tail.</p>",
                 "<p>a</p><nav>x<pre>c</nav></pre><p>Tail.</p>"):
        text = html_to_text(page)[1]
        assert "```" not in text and text.startswith("a") and text.endswith("Tail.")


def test_randomly_misnested_pages_never_fail_to_read():
    """Tags opened and closed in random order (seeded): every page reads, and no code fence is left open."""
    import random

    from pipeline.retrieval.strips import blocks

    tags = ["nav", "pre", "code", "p", "main", "article", "script", "h2", "table", "tr", "td", "footer", "div", "br",
            "aside", "li", "ul"]
    rng = random.Random(0)
    for _ in range(20_000):
        parts = []
        for _ in range(rng.randint(1, 14)):
            tag, draw = rng.choice(tags), rng.random()
            if draw < 0.4:
                parts.append(f"<{tag}" + (' class="language-py"' if tag == "code" else "") + ">")
            else:
                words = ["text", "a < b", "\n\nx\n", "more.", "<!--c-->"]
                parts.append(f"</{tag}>" if draw < 0.75 else rng.choice(words))
        text = html_to_text("".join(parts))[1]
        assert all(not code or block.rstrip().endswith("```") for code, block in blocks(text)), parts


def test_text_that_starts_like_a_code_fence_opens_no_code_block():
    from pipeline.retrieval.strips import blocks, sentence_strips

    page = ("<p><code>```js</code></p><p>Then a sentence here.</p><pre>real()</pre>"
            "<p>Missing wrappers\n ~~~~~~~~~~~~~~~~\nYou are reading this because a call failed.</p>")
    text = html_to_text(page)[1]
    assert [code for code, _ in blocks(text)] == [False, False, True, False]  # only the <pre> is code
    assert "You are reading this because a call failed." in sentence_strips(text)[-1]


def test_a_page_that_marks_its_content_is_read_from_there_only():
    page = ('<body><a href="#content">Skip to main content</a><div id="help-popup"><h2>Keyboard shortcuts</h2>'
            '<p>Press S to search.</p></div><div class="menu-bar"><h1>The Book</h1></div>'
            '<main><h1>Refunds</h1><p>Refunds take five days.</p></main><article><p>Second part.</p></article>'
            '<div>Site-wide banner text.</div></body>')
    assert html_to_text(page)[1] == "# Refunds\n\nRefunds take five days.\n\nSecond part."
    # no <main> or <article>: every paragraph is the page's; an empty <main> is no mark
    assert html_to_text("<div><p>Only text.</p></div>")[1] == "Only text."
    assert html_to_text("<main> </main><p>Text outside.</p>")[1] == "Text outside."


def test_preformatted_text_is_a_fenced_code_block_kept_whole():
    page = "<p>Run it:</p><pre>\ncargo doc\n\n    --open\n</pre><pre></pre><p>Done.</p>"
    _, text = html_to_text(page)
    assert text == "Run it:\n\n```\ncargo doc\n \n    --open\n```\n\nDone."  # the blank line stays inside
    assert chunk_text(text) == [text] and sentence_strips(text) == ["```\ncargo doc\n \n    --open\n```"]
    code = '<pre><code class="hljs language-rust">fn main() {}</code></pre>'  # the language a highlighter marks
    assert html_to_text(code)[1] == "```rust\nfn main() {}\n```"


def test_text_files_in_a_named_encoding_are_read_and_a_page_s_own_charset_comes_first(tmp_path):
    from models import ConfigError, DataError
    from pipeline.retrieval.documents import check_encoding
    from pipeline.retrieval.index import LocalHybridIndex
    from pipeline.retrieval.ingest import ingest
    from tests.pipeline.conftest import HashEmbedder

    (tmp_path / "legacy.txt").write_bytes("Le café coûte 5 € – très bien.".encode("cp1252"))
    (tmp_path / "notes.md").write_text("# Notes\n\nPlain UTF-8 – with a dash.", encoding="utf-8")
    (tmp_path / "page.html").write_bytes('<meta charset="koi8-r"><p>Привет</p>'.encode("koi8-r"))
    with pytest.raises(DataError, match=r"legacy\.txt: not UTF-8 .*`crag index add --encoding cp1252`"):
        read_document(tmp_path / "legacy.txt")
    assert read_document(tmp_path / "legacy.txt", encoding="cp1252")[1] == "Le café coûte 5 € – très bien."
    assert read_document(tmp_path / "notes.md", encoding="cp1252")[1].endswith("Plain UTF-8 – with a dash.")
    assert read_document(tmp_path / "page.html", encoding="cp1252")[1] == "Привет"  # its own declaration wins
    (tmp_path / "undefined.txt").write_bytes(b"caf\xe9 \x81")  # 0x81 has no character in cp1252
    with pytest.raises(DataError, match=r"undefined\.txt: neither UTF-8 nor cp1252"):
        read_document(tmp_path / "undefined.txt", encoding="cp1252")
    for bad in ("no-such-codec", "rot13", "base64"):
        with pytest.raises(ConfigError, match=repr(bad)):
            check_encoding(bad)
        with pytest.raises(ConfigError, match=repr(bad)):
            read_document(tmp_path / "legacy.txt", encoding=bad)
    index = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    with pytest.raises(ConfigError, match="unknown encoding 'nope'"):
        ingest(index, [tmp_path / "legacy.txt"], tenant="t", encoding="nope")
    report = ingest(index, [tmp_path / "legacy.txt", tmp_path / "notes.md"], tenant="t", encoding="cp1252")
    assert report.files == 2 and any("café" in c.text for c in index.iter_chunks())


def test_an_xhtml_page_reads_as_html(tmp_path):
    path = tmp_path / "refunds.xhtml"
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head>'
                    "<title>Refunds</title></head><body><p>Refunds take 30 days.</p></body></html>", encoding="utf-8")
    assert read_document(path) == ("Refunds", "Refunds take 30 days.")


def test_tables_as_office_suites_export_them_keep_their_rows_whole():
    # LibreOffice's (and Word's) "Save as HTML": a <p> in every cell, end tags left out, a heading or a list in a
    # cell, and a table nested in a cell, whose rows are read apart from the row around them
    page = ('<table><tr valign="top"><td><p style="orphans: 0">\n\t\t\tZone</p>\n</td><td><p>Days</p><td><p>Cost'
            "</p></tr><tr><td><h3>EU</h3><td><ul><li><p>5</p><li><p>working</p></ul></td><td><p>Free</p></td></tr>"
            "<tr><td><p>Notes</p><table><tr><td>inner a</td><td>inner b</td></tr></table></td><td>end</td></tr>"
            "</table><p>After the table.</p>")
    assert html_to_text(page)[1].split("\n\n") == [
        "Zone | Days | Cost", "EU | 5 working | Free", "Notes", "inner a | inner b", "end", "After the table."]


def test_list_items_read_with_the_labels_a_browser_shows():
    page = ('<ol><li>Pack the item</li><li><p>Print the label</p><ol type="a"><li>by post<li>by van</ol></li></ol>'
            '<ul><li><img src="tag.png" alt="A red sale tag"></li><li><h3>Exchanges</h3></li><li></li></ul>'
            '<ol start="3" reversed><li>three<li value="9">nine<li>eight</ol><ol type="I" start="4"><li>four</ol>'
            "<p>After the lists.</p><li>an item outside any list</li>"
            "<nav><ol><li>Home</li></ol></nav><ol><li>after the menu</li></ol>")
    assert html_to_text(page)[1].split("\n\n") == [
        "1. Pack the item", "2. Print the label", "  a. by post", "  b. by van", "- A red sale tag", "### Exchanges",
        "3. three", "9. nine", "8. eight", "IV. four", "After the lists.", "an item outside any list",
        "1. after the menu"]


@pytest.mark.parametrize("page", ["<ol>" * 40000 + "x" + "</ul>" * 40000,  # end tags of lists never opened
                                  "<ol>" * 40000 + "<li>x" * 40000])  # items 40,000 lists deep
def test_crafted_list_nesting_reads_in_linear_time(page):
    start = time.perf_counter()  # each was quadratic: 20,000 of them took 9 s
    text = html_to_text(page)[1]
    assert time.perf_counter() - start < 5
    assert max(len(line) - len(line.lstrip(" ")) for line in text.split("\n\n")) <= 16  # indented 8 levels at most
