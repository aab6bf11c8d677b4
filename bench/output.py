"""How a bench hands back its results: JSON on standard output, and in the ``--json`` file when one is named."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def emit(results: Any, json_path: Path | None) -> None:
    """Write ``results`` as indented JSON to ``json_path`` (when given) and to standard output."""
    text = json.dumps(results, indent=2)
    if json_path:
        json_path.write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")
