"""Progress for long steps, on stderr: a tqdm bar on a terminal (shown once a step has taken half a second), else a
line every few seconds (a log file or CI gets no carriage-return bars, and a quick step writes nothing).

Commands that take more than a couple of seconds (export, eval, eval --cascade, eval-pipeline) report
through these two helpers so a user never stares at a silent terminal. ``CRAG_NO_PROGRESS=1`` turns
them off (tqdm's own ``TQDM_DISABLE`` works too); results on stdout are never mixed with progress.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["progress", "stage"]

T = TypeVar("T")
FALLBACK_EVERY_S = 2.0
BAR_DELAY_S = 0.5  # a step quicker than this shows no bar at all


def _enabled() -> bool:
    return os.environ.get("CRAG_NO_PROGRESS", "").strip().lower() not in ("1", "true", "yes")


def _tqdm() -> Any:
    """tqdm's bar class, or None where tqdm is not installed (then lines are written)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def progress(items: Iterable[T], *, desc: str, total: int | None = None, unit: str = "it") -> Iterator[T]:
    """Yield ``items`` while showing how far along they are."""
    if not _enabled():
        yield from items
        return
    bar = _tqdm() if sys.stderr.isatty() else None
    if bar is not None:
        yield from bar(items, desc=desc, total=total, unit=unit, file=sys.stderr, mininterval=0.5, leave=False,
                        delay=BAR_DELAY_S)
        return
    last = time.monotonic()
    for done, item in enumerate(items, start=1):
        yield item
        if time.monotonic() - last >= FALLBACK_EVERY_S:
            last = time.monotonic()
            sys.stderr.write(f"{desc}: {done}{f'/{total}' if total else ''} {unit}\n")
            sys.stderr.flush()


@contextmanager
def stage(desc: str) -> Iterator[None]:
    """One named step of a long command: a line when it starts and one with its duration when it ends."""
    if not _enabled():
        yield
        return
    sys.stderr.write(f"{desc} ...\n")
    sys.stderr.flush()
    start = time.monotonic()
    yield
    sys.stderr.write(f"{desc}: done in {time.monotonic() - start:.1f} s\n")
    sys.stderr.flush()
