"""The runnable examples in docs/integrations/ over the demo golden set, with a loopback LLM counting calls."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("example", ["langgraph_crag.py", "llamaindex_crag.py", "haystack_crag.py"])
def test_example_escalates_only_the_band_and_reports_saved_calls(example, server, tmp_path):
    out = tmp_path / "report.json"
    env = {**os.environ, "CRAG_NO_PROGRESS": "1", "OPENAI_API_KEY": "sk-test"}
    result = subprocess.run([sys.executable, str(ROOT / "docs" / "integrations" / example), "--llm-model", "fake",
                             "--llm-base-url", server.base_url, "--llm-timeout", "5", "--json", str(out)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["questions"] == 26 and report["chunks_graded"] == report["tutorial_llm_grading_calls"] > 0
    assert 0 < report["llm_grading_calls"] == len(server.requests) < report["chunks_graded"]
    assert sum(report["decisions"].values()) == 26
