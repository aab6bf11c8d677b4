"""Alt text of pictures in Office files: what the author says a picture shows, not what a program wrote there."""

from __future__ import annotations

import re

__all__ = ["authored"]

WRITTEN_BY_A_PROGRAM = re.compile(r"(?:description|caption) (?:was )?automatically generated\W*$"  # Office's own
                                  r"|^[\w .-]+\.(?:png|jpe?g|gif|bmp|tiff?|svg|emf|wmf|webp)$",  # the file's name
                                  re.IGNORECASE)


def authored(alt: object) -> str | None:
    """``alt`` on one line, or None when it is empty or was written by a program: Office's "... Description
    automatically generated" captions, or the image file's name (what python-docx, python-pptx and older Office
    versions write)."""
    text = " ".join(str(alt or "").split())  # PowerPoint's line breaks (\v) are whitespace too
    return text if text and not WRITTEN_BY_A_PROGRAM.search(text) else None
