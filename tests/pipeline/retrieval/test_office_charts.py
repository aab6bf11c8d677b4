"""A Word or PowerPoint chart reads as its title and its series' cached values by category, from the chart part;
a chart part that is missing reads as nothing, a damaged one is an error naming the file."""

import docx
import pytest

from models.errors import DataError
from pipeline.retrieval.documents import read_document
from tests.pipeline.conftest import add_docx_chart

NS = ('xmlns:c="http://schemas.openxmlformats.org/drawingml/2006/chart" '
      'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"')


def chart_document(tmp_path, space: bytes | None, name: str = "report.docx"):
    """A Word file of one paragraph holding a chart whose part is ``space`` (None: a relationship to nothing)."""
    document = docx.Document()
    add_docx_chart(document, document.add_paragraph("Figures:"), space)
    path = tmp_path / name
    document.save(str(path))
    return path


def reference(values: list[str], cache: str = "strCache") -> str:
    """A reference to cells with its cached values, as a series' name, categories or values hold one."""
    cached = "".join(f'<c:pt idx="{i}"><c:v>{v}</c:v></c:pt>' for i, v in enumerate(values))
    return f"<c:strRef><c:f>Sheet1!A1</c:f><c:{cache}>{cached}</c:{cache}></c:strRef>"


def points(tag: str, values: list[str], cache: str = "strCache") -> str:
    return f"<c:{tag}>{reference(values, cache)}</c:{tag}>"


def test_a_title_from_a_cell_categories_of_two_levels_and_values_that_are_no_numbers(tmp_path):
    categories = ('<c:cat><c:multiLvlStrRef><c:multiLvlStrCache><c:ptCount val="2"/><c:lvl><c:pt idx="0"><c:v>Jan'
                  '</c:v></c:pt><c:pt idx="1"><c:v>Feb</c:v></c:pt></c:lvl><c:lvl><c:pt idx="0"><c:v>2024</c:v>'
                  "</c:pt></c:lvl></c:multiLvlStrCache></c:multiLvlStrRef></c:cat>")
    space = (f"<c:chartSpace {NS}><c:chart><c:title><c:tx>{reference(['Orders'])}</c:tx></c:title>"
             f"<c:plotArea><c:lineChart><c:ser>{points('tx', ['Web shop'])}{categories}"
             f"{points('val', ['120', 'n/a'], 'numCache')}</c:ser><c:ser>{points('tx', [''])}"
             f"{points('val', ['7', '8'], 'numCache')}</c:ser><c:ser>{points('tx', ['Empty'])}</c:ser>"
             "</c:lineChart></c:plotArea></c:chart></c:chartSpace>").encode()
    assert read_document(chart_document(tmp_path, space))[1] == (
        "Figures:\n\nChart: Orders\nWeb shop: Jan 120\nSeries: 1 7, 2 8")


def test_a_missing_chart_part_reads_as_nothing_and_a_damaged_one_is_an_error(tmp_path):
    assert read_document(chart_document(tmp_path, None))[1] == "Figures:"
    with pytest.raises(DataError, match=r"broken\.docx: a chart part is not well-formed XML"):
        read_document(chart_document(tmp_path, b"<c:chartSpace", "broken.docx"))
