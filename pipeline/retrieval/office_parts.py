"""The parts a Word or PowerPoint frame points to (a chart, a SmartArt diagram's data), the document's stored Title
property, looked up alike whether python-docx or python-pptx opened the file, and the text of DrawingML paragraphs
in them."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

from models.errors import DataError
from pipeline.retrieval.zipped_xml import MAX_PART_BYTES, xml_root

__all__ = ["GRAPHIC_DATA", "R_ID", "drawing_text", "related_xml", "stored_title"]

CORE_PROPERTIES = "http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
GRAPHIC_DATA = f"{A}graphicData"  # what a frame holds: a picture, a chart, a diagram
R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"  # a relationship named in XML


def related_xml(part: Any, rid: str | None, what: str, kind: str) -> ElementTree.Element | None:
    """The parsed XML of the part that ``part`` (python-docx's or python-pptx's) relates to by ``rid``; None without
    ``rid`` or such a relationship. Larger than :data:`MAX_PART_BYTES` or not well-formed is a DataError naming the
    file (``what``) and the ``kind`` of part ("a chart part")."""
    if not rid:
        return None
    try:  # python-docx keeps a part's related parts in a dict, python-pptx looks them up
        related = part.related_parts[rid] if hasattr(part, "related_parts") else part.related_part(rid)
    except KeyError:
        return None
    blob = bytes(related.blob)
    if not blob:
        return None
    if len(blob) > MAX_PART_BYTES:
        raise DataError(f"{what}: {kind} unpacks to more than {MAX_PART_BYTES:,} bytes; not read")
    return xml_root(blob, f"{what}: {kind}")


def stored_title(document: Any) -> str:
    """The Title property the file stores ('' without one). For a file without a core-properties part (html-docx-js
    writes none) python-docx and python-pptx make one up, titled "Word Document" or "PowerPoint Presentation": that
    is no title of the document's."""
    package = document.part.package
    try:
        package.part_related_by(CORE_PROPERTIES)
    except KeyError:
        return ""
    return " ".join(str(document.core_properties.title or "").split())


def drawing_text(element: ElementTree.Element | None) -> str:
    """The text of the DrawingML paragraphs (``a:p``) under ``element`` (a chart's title, a diagram node's text) on
    one line, the paragraphs joined by spaces; '' for None."""
    if element is None:
        return ""
    paragraphs = ("".join(run.text or "" for run in paragraph.iter(f"{A}t")) for paragraph in element.iter(f"{A}p"))
    return " ".join(" ".join(paragraphs).split())
