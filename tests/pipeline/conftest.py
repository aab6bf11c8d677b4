"""Shared pipeline fixtures: a hashing embedder, a small multi-tenant corpus in each retriever, the default grader."""

from __future__ import annotations

import base64
import hashlib
import random
import re
import sys
import zipfile

import numpy as np
import pytest

from grader import load_grader
from pipeline.retrieval.documents import Principal, StoredChunk
from pipeline.retrieval.index import LocalHybridIndex


class HashEmbedder:
    """Bag-of-words hashing vectors: a fast, deterministic stand-in for MiniLM at the index's edge."""

    name = "hash"

    def embed(self, texts):
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 384] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-9)


# a picture for Office files
ONE_PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")


def damaged_copies_read(whole: bytes, suffix: str, tmp_path, *, copies: int, seed: int) -> int:
    """Read ``copies`` damaged copies of a file (1-40 random bytes changed each): each reads, or is a DataError naming
    its file, and nothing else (any other exception fails the test). Returns how many read."""
    from models.errors import DataError
    from pipeline.retrieval.documents import read_document

    rng = random.Random(seed)
    read = 0
    for copy in range(copies):
        damaged = bytearray(whole)
        for _ in range(rng.randint(1, 40)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        path = tmp_path / f"damaged-{copy}{suffix}"
        path.write_bytes(bytes(damaged))
        try:
            read_document(path)
            read += 1
        except DataError as exc:
            assert path.name in str(exc)
    return read


def ole_bytes(streams: dict[str, bytes]) -> bytes:
    """An OLE compound file holding ``streams`` at its root, written by another implementation of the format
    (aspose-email-foss's CFB writer), so that the readers are checked against the format, not against themselves."""
    from aspose.email_foss.cfb import CFBDocument, CFBStorage, CFBStream, CFBWriter

    root = CFBStorage("Root Entry")
    for name, data in streams.items():
        root.add_stream(CFBStream(name, data))
    return CFBWriter.to_bytes(CFBDocument(root))


def assert_needs_extra(path, module: str, extra: str, monkeypatch) -> None:
    """Read without ``module`` installed, ``path`` is a MissingDependencyError naming ``extra``: one file's problem,
    which `crag index add --skip-errors` passes over."""
    from models import MissingDependencyError
    from pipeline.retrieval.documents import read_document

    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    with pytest.raises(MissingDependencyError, match=rf"crag-grader\[{extra}\]") as caught:
        read_document(path)
    assert caught.value.extra == extra


OPENDOCUMENT_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
                   'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
                   'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
                   'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
                   'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
                   'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
                   'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
                   'xmlns:xlink="http://www.w3.org/1999/xlink" '
                   'xmlns:dc="http://purl.org/dc/elements/1.1/"')


# the records a spreadsheet's "Billing" sheet reads as, in the workbook tests of every spreadsheet format
BILLING_RECORDS = (
    "sheet: Billing\nquestion: Can I pay by invoice?\nanswer: Yes, on the Business plan.\nupdated: 2024-03-01",
    "sheet: Billing\nquestion: What is the refund window?\nanswer: 30 days\nupdated: 2024-05-02 09:30")


def write_opendocument(path, kind: str, body: str, *, styles: str = "", title: str | None = None) -> None:
    """An OpenDocument file (``kind``: "text", "spreadsheet" or "presentation") of content.xml with ``body`` inside its
    ``office:<kind>`` element, automatic ``styles``, and a meta.xml with ``title`` when one is given."""
    with zipfile.ZipFile(path, "w") as document:
        document.writestr("mimetype", f"application/vnd.oasis.opendocument.{kind}")
        document.writestr("content.xml", f"<office:document-content {OPENDOCUMENT_NS}><office:automatic-styles>"
                                         f"{styles}</office:automatic-styles><office:body><office:{kind}>{body}"
                                         f"</office:{kind}></office:body></office:document-content>")
        if title is not None:
            document.writestr("meta.xml", f"<office:document-meta {OPENDOCUMENT_NS}><office:meta><dc:title>{title}"
                                          "</dc:title></office:meta></office:document-meta>")


# a chart object (its own content.xml in the package) of two series over two quarters, and a series without values
ODF_CHART_OBJECT = (
    '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:chart="urn:oasis:names:tc:opendocument:xmlns:chart:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:chart><chart:chart>'
    "<chart:title><text:p>Revenue by quarter</text:p></chart:title><table:table table:name='local-table'>"
    "<table:table-header-rows><table:table-row><table:table-cell/><table:table-cell><text:p>Revenue</text:p>"
    "</table:table-cell><table:table-cell><text:p>Costs</text:p></table:table-cell><table:table-cell><text:p>"
    "Spare</text:p></table:table-cell></table:table-row>"
    "</table:table-header-rows><table:table-rows>"
    + "".join(f"<table:table-row><table:table-cell><text:p>{quarter}</text:p></table:table-cell>"
              f"<table:table-cell office:value-type='float' office:value='{revenue}'><text:p>{revenue}</text:p>"
              f"</table:table-cell><table:table-cell office:value-type='float' office:value='{costs}'><text:p>"
              f"{costs}</text:p></table:table-cell><table:table-cell office:value-type='float' office:value='NaN'>"
              "<text:p/></table:table-cell></table:table-row>"  # a series without values (LibreOffice: NaN)
              for quarter, revenue, costs in (("Q2", "3.70", "2"), ("Q3", "4.1", "2.2")))
    + "</table:table-rows></table:table></chart:chart></office:chart></office:body></office:document-content>")


DIAGRAM_DATA_TYPE = "application/vnd.openxmlformats-officedocument.drawingml.diagramData+xml"
DIAGRAM_DATA_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/diagramData"


def smartart_data(tree: list[tuple[str, list[str]]]) -> bytes:
    """A SmartArt data part as Office writes one: the document point, a node per step and per sub-step (``tree``:
    (step, [sub-steps])), the transition and layout points Office adds, parent-of and presentation connections; the
    points listed out of order and the steps connected in reverse, so that only the connections' order says which
    comes first."""
    points = ['<dgm:pt modelId="{doc}" type="doc"><dgm:prSet/><dgm:spPr/><dgm:t><a:bodyPr/><a:p><a:endParaRPr/>'
              "</a:p></dgm:t></dgm:pt>"]
    links = []

    def node(model: str, text: str, parent: str, order: int) -> None:
        runs = "".join(f"<a:p><a:r><a:t>{line}</a:t></a:r></a:p>" for line in text.split("|"))
        points.insert(1, f'<dgm:pt modelId="{model}"><dgm:prSet phldrT="[Text]"/><dgm:spPr/><dgm:t><a:bodyPr/>'
                         f"{runs}</dgm:t></dgm:pt>")
        points.append(f'<dgm:pt modelId="{model}-par" type="parTrans" cxnId="{model}-c"><dgm:prSet/><dgm:spPr/>'
                      "<dgm:t><a:bodyPr/><a:p><a:endParaRPr/></a:p></dgm:t></dgm:pt>")
        points.append(f'<dgm:pt modelId="{model}-pres" type="pres"><dgm:prSet presName="node"/><dgm:spPr/>'
                      "</dgm:pt>")
        links.insert(0, f'<dgm:cxn modelId="{model}-c" srcId="{parent}" destId="{model}" srcOrd="{order}" '
                        'destOrd="0"/>')
        links.append(f'<dgm:cxn modelId="{model}-p" type="presOf" srcId="{model}" destId="{model}-pres" srcOrd="0" '
                     'destOrd="0"/>')

    for order, (step, subs) in enumerate(tree):
        node(f"{{s{order}}}", step, "{doc}", order)
        for sub_order, sub in enumerate(subs):
            node(f"{{s{order}-{sub_order}}}", sub, f"{{s{order}}}", sub_order)
    return ('<dgm:dataModel xmlns:dgm="http://schemas.openxmlformats.org/drawingml/2006/diagram" '
            'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><dgm:ptLst>' + "".join(points)
            + "</dgm:ptLst><dgm:cxnLst>" + "".join(links) + "</dgm:cxnLst><dgm:bg/><dgm:whole/></dgm:dataModel>"
            ).encode("utf-8")


def smartart_graphic_data(data_rid: str) -> str:
    """The ``a:graphicData`` of a SmartArt frame whose data part is related by ``data_rid``."""
    return ('<a:graphicData xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
            'uri="http://schemas.openxmlformats.org/drawingml/2006/diagram"><dgm:relIds '
            'xmlns:dgm="http://schemas.openxmlformats.org/drawingml/2006/diagram" '
            'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" '
            f'r:dm="{data_rid}" r:lo="rIdLayout" r:qs="rIdStyle" r:cs="rIdColors"/></a:graphicData>')


def docx_inline_run(graphic_data: str, number: int) -> str:
    """A Word run holding an inline drawing of ``graphic_data`` (an ``a:graphicData``: a chart, a diagram), as Word
    writes one."""
    return ('<w:r xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
            'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
            'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><w:drawing><wp:inline>'
            f'<wp:docPr id="{number}" name="Drawing {number}"/><a:graphic>{graphic_data}</a:graphic></wp:inline>'
            "</w:drawing></w:r>")


def add_docx_chart(document, paragraph, space: bytes | None, number: int = 1) -> None:
    """A chart whose part holds ``space`` (None: its relationship names no part) anchored in ``paragraph`` of the
    python-docx ``document``."""
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from docx.oxml import parse_xml

    rid = "rId404"
    if space is not None:
        part = Part(PackURI(f"/word/charts/chart{number}.xml"),
                    "application/vnd.openxmlformats-officedocument.drawingml.chart+xml", space, document.part.package)
        rid = document.part.relate_to(part, "http://schemas.openxmlformats.org/officeDocument/2006/relationships/chart")
    paragraph._p.append(parse_xml(docx_inline_run(
        '<a:graphicData xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
        'uri="http://schemas.openxmlformats.org/drawingml/2006/chart"><c:chart '
        'xmlns:c="http://schemas.openxmlformats.org/drawingml/2006/chart" '
        f'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" r:id="{rid}"/>'
        "</a:graphicData>", number)))


def add_pptx_smartart(slide, data: bytes, *, top: int) -> None:
    """A SmartArt frame at ``top`` on ``slide`` whose data part holds ``data``, as PowerPoint saves one."""
    from pptx.opc.package import Part
    from pptx.opc.packuri import PackURI
    from pptx.oxml import parse_xml

    part = Part(PackURI(f"/ppt/diagrams/data{top}.xml"), DIAGRAM_DATA_TYPE, slide.part.package, data)
    rid = slide.part.relate_to(part, DIAGRAM_DATA_REL)
    slide.shapes._spTree.append(parse_xml(
        '<p:graphicFrame xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
        'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><p:nvGraphicFramePr>'
        f'<p:cNvPr id="{len(slide.shapes) + 100}" name="Diagram"/><p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr>'
        f'<p:xfrm><a:off x="457200" y="{top}"/><a:ext cx="8000000" cy="1000000"/></p:xfrm>'
        f"<a:graphic>{smartart_graphic_data(rid)}</a:graphic></p:graphicFrame>"))


def make_chunk(cid, text, tenant="a", roles=(), **kw):
    return StoredChunk(chunk_id=cid, text=text, tenant=tenant, source=f"{cid}.md", allowed_roles=frozenset(roles),
                       **kw)


CORPUS = [
    make_chunk("a-paris", "Paris is the capital and largest city of France.", title="France"),
    make_chunk("a-bananas", "Bananas are rich in potassium and grow in tropical regions.", title="Bananas"),
    make_chunk("a-secret", "The merger code name for Project Falcon is BLUEBIRD-7.", roles=("legal",),
               title="Falcon"),
    make_chunk("b-invoice", "Invoice INV-2044 from tenant B was paid on 2024-03-01.", tenant="b", title="Invoices"),
    make_chunk("b-falcon", "Project Falcon at tenant B is a bird-watching club that meets on Sundays.", tenant="b",
               title="Clubs"),
]
TENANT_A = Principal(tenant="a")
LEGAL_A = Principal(tenant="a", roles=frozenset({"legal"}))
TENANT_B = Principal(tenant="b")


@pytest.fixture
def index(tmp_path):
    idx = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    idx.add(CORPUS)
    return idx


@pytest.fixture(params=["local", "qdrant"])
def retriever(request, tmp_path):
    """The same corpus in the embedded index and in Qdrant (local mode): every isolation test runs on both."""
    if request.param == "local":
        store = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    else:
        from pipeline.retrieval.qdrant_store import QdrantRetriever

        store = QdrantRetriever("test", location=":memory:", embedder=HashEmbedder())
    store.add(CORPUS)
    return store


@pytest.fixture(scope="session")
def grader():
    return load_grader("default")
