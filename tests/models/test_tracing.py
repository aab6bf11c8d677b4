"""Tracing helpers: spans with clean attributes when opentelemetry is there, no-ops when it is not."""

import subprocess
import sys

from models.tracing import _clean


def test_only_numbers_flags_and_short_labels_become_attributes():
    cleaned = _clean({"n": 3, "ok": True, "p": 0.5, "label": "correct", "text": "x" * 65, "none": None,
                      "list": [1, 2], "obj": object()})
    assert cleaned == {"n": 3, "ok": True, "p": 0.5, "label": "correct"}


def test_without_opentelemetry_spans_are_no_ops():
    code = ("import sys; sys.modules['opentelemetry'] = None\n"
            "from models.tracing import record_span, span, tracer\n"
            "assert tracer() is None\n"
            "with span('crag.run', n=1) as s:\n"
            "    assert s is None\n"
            "record_span('crag.grade', 0.0, 1.0, {'n': 1})\n"
            "print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
