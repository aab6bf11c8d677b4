"""How a bench hands back its results: JSON on standard output, and in the ``--json`` file when one is named."""

from __future__ import annotations

import argparse
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


def work_parser(doc: str | None) -> argparse.ArgumentParser:
    """The arguments of a bench on the recipe's splits: ``--work`` (their folder) and ``--json``; callers add more."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("runs/v3"), help="the recipe's splits (crag recipe)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    return parser
