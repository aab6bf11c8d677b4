"""The text of a SmartArt diagram (a process, a cycle, an org chart) in a Word or PowerPoint file, as an outline.

python-docx and python-pptx see a SmartArt graphic as an opaque frame, yet decks and reports put their key steps in
one ("Plan -> Build -> Ship", a team's reporting lines). Its words live in the diagram's data part ([ISO/IEC 29500]
DrawingML diagrams, ``/ppt/diagrams/data1.xml`` or ``/word/diagrams/data1.xml``), which the frame names by its
``dgm:relIds r:dm`` relationship: a list of points (the document, its nodes, and points that only lay them out) and
connections between them. Each node's text is read as a list item, indented by its depth in the tree the
parent-of connections make, children in their order; a node without text passes its depth on to its children.
"""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

from pipeline.retrieval.office_parts import drawing_text, related_xml

__all__ = ["DIAGRAM_URI", "diagram_lines"]

DIAGRAM_URI = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
DGM = f"{{{DIAGRAM_URI}}}"
R_DM = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}dm"
NODE_TYPES = ("node", "asst")  # a point of the diagram's content (an assistant in an org chart too)
PARENT_OF = "parOf"  # a connection's default type: source is the parent of destination
MAX_NODES = 10_000


def diagram_lines(frame: Any, part: Any, what: str, bullet: str) -> list[str]:
    """The outline of the SmartArt diagram in ``frame`` (an lxml element holding ``dgm:relIds``; ``part``: the
    python-docx or python-pptx part it is in), a line per node with text: ``bullet`` indented two spaces a level; []
    when ``frame`` holds no diagram, its data part is missing or has no text. ``what`` names the file in errors."""
    ids = next(iter(frame.iter(f"{DGM}relIds")), None)
    model = related_xml(part, ids.get(R_DM) if ids is not None else None, what, "a SmartArt diagram's data")
    return [f"{'  ' * depth}{bullet}{text}" for depth, text in _outline(model)] if model is not None else []


def _outline(model: ElementTree.Element) -> list[tuple[int, str]]:
    """(depth, text) of each node with text, in the diagram's order."""
    points = model.findall(f"{DGM}ptLst/{DGM}pt")[:MAX_NODES]
    texts = {point.get("modelId", ""): drawing_text(point.find(f"{DGM}t")) for point in points
             if point.get("type", "node") in NODE_TYPES}
    children: dict[str, list[tuple[int, str]]] = {}
    has_parent: set[str] = set()
    for connection in model.findall(f"{DGM}cxnLst/{DGM}cxn")[:MAX_NODES]:
        if connection.get("type", PARENT_OF) != PARENT_OF:
            continue
        source, destination = connection.get("srcId", ""), connection.get("destId", "")
        children.setdefault(source, []).append((_order(connection.get("srcOrd")), destination))
        has_parent.add(destination)
    roots = [point.get("modelId", "") for point in points if point.get("type") == "doc"]
    roots += [node for node in texts if node not in has_parent]  # a node no connection places: at the top
    lines: list[tuple[int, str]] = []
    seen: set[str] = set()
    stack = [(0, root) for root in reversed(roots)]
    while stack:  # depth first, without recursion: a crafted diagram may nest deep or loop
        depth, node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        text = texts.get(node, "")
        if text:
            lines.append((depth, text))
        below = depth + 1 if text else depth
        stack += [(below, child) for _, child in sorted(children.get(node, []), reverse=True)]
    return lines


def _order(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0
