"""OpenTelemetry spans when the ``otel`` extra is installed (and the application configured a tracer
provider); without it every helper here is a no-op costing one failed import, done once.

Attributes are restricted to numbers, booleans and short labels chosen by the caller: no query, chunk,
tenant text or key ever goes into a span.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["record_span", "span", "tracer"]

MAX_LABEL_CHARS = 64


@functools.cache
def tracer() -> Any:
    """The project's tracer, or None when opentelemetry is not installed."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace.get_tracer("crag-grader")


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= MAX_LABEL_CHARS):
            out[key] = value
    return out


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A span around a block (the current span inside it), or None without opentelemetry."""
    active = tracer()
    if active is None:
        yield None
        return
    with active.start_as_current_span(name, attributes=_clean(attributes)) as current:
        yield current


def record_span(name: str, start_s: float, end_s: float, attributes: Mapping[str, Any]) -> None:
    """A finished span with the given wall-clock times, child of the current span (steps timed elsewhere)."""
    active = tracer()
    if active is None:
        return
    done = active.start_span(name, start_time=int(start_s * 1e9), attributes=_clean(attributes))
    done.end(end_time=int(max(end_s, start_s) * 1e9))
