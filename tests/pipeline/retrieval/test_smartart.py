"""A SmartArt diagram's words are read from its data part as an outline: the tree its parent-of connections make,
whatever order its points are listed in, safe against diagrams that loop or name a part that is not there."""

import pytest

from pipeline.retrieval.documents import read_document
from tests.pipeline.conftest import add_pptx_smartart, smartart_graphic_data

pptx = pytest.importorskip("pptx")

NS = ('xmlns:dgm="http://schemas.openxmlformats.org/drawingml/2006/diagram" '
      'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"')


def point(model: str, text: str = "", kind: str = "") -> str:
    kind_attribute = f' type="{kind}"' if kind else ""
    body = f"<dgm:t><a:bodyPr/><a:p><a:r><a:t>{text}</a:t></a:r></a:p></dgm:t>" if text else ""
    return f'<dgm:pt modelId="{model}"{kind_attribute}><dgm:prSet/>{body}</dgm:pt>'


def link(source: str, destination: str, order: int, kind: str = "") -> str:
    kind_attribute = f' type="{kind}"' if kind else ""
    return f'<dgm:cxn modelId="{source}>{destination}"{kind_attribute} srcId="{source}" destId="{destination}" ' \
           f'srcOrd="{order}" destOrd="0"/>'


def read_diagram(tmp_path, points: list[str], links: list[str]) -> str:
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[6])  # blank
    data = f"<dgm:dataModel {NS}><dgm:ptLst>{''.join(points)}</dgm:ptLst><dgm:cxnLst>{''.join(links)}</dgm:cxnLst>" \
           "</dgm:dataModel>"
    add_pptx_smartart(slide, data.encode("utf-8"), top=1_000_000)
    path = tmp_path / "diagram.pptx"
    presentation.save(str(path))
    return read_document(path)[1]


def test_an_org_chart_reads_by_its_connections_and_a_node_without_text_passes_its_depth_on(tmp_path):
    points = [point("cfo", "CFO"), point("doc", kind="doc"), point("ceo", "CEO"), point("empty"),
              point("cto", "CTO"), point("pa", "Assistant", kind="asst"), point("layout", "ignored", kind="pres"),
              point("gap", "between", kind="sibTrans"), point("loose", "Board")]
    links = [link("ceo", "cto", 1), link("ceo", "cfo", 0), link("doc", "ceo", 0), link("ceo", "empty", 2),
             link("empty", "pa", 0), link("ceo", "layout", 3, kind="presOf")]
    assert read_diagram(tmp_path, points, links) == (
        "## Slide 1\n\n* CEO\n  * CFO\n  * CTO\n  * Assistant\n* Board")  # "Board": a node nothing places


def test_a_diagram_whose_connections_loop_reads_each_node_once(tmp_path):
    points = [point("doc", kind="doc"), point("a", "Plan"), point("b", "Build")]
    links = [link("doc", "a", 0), link("a", "b", 0), link("b", "a", 0)]
    assert read_diagram(tmp_path, points, links) == "## Slide 1\n\n* Plan\n  * Build"


def test_a_frame_naming_a_missing_data_part_reads_as_nothing(tmp_path):
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    slide.shapes.title.text = "Process"
    from pptx.oxml import parse_xml

    slide.shapes._spTree.append(parse_xml(
        '<p:graphicFrame xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
        'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><p:nvGraphicFramePr>'
        '<p:cNvPr id="40" name="Diagram"/><p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr>'
        '<p:xfrm><a:off x="0" y="0"/><a:ext cx="10" cy="10"/></p:xfrm>'
        f"<a:graphic>{smartart_graphic_data('rId99')}</a:graphic></p:graphicFrame>"))
    path = tmp_path / "process.pptx"
    presentation.save(str(path))
    assert read_document(path)[1] == "## Process"
