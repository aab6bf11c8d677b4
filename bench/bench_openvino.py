"""OpenVINO against crag's onnxruntime path on the default grader's cross-encoder: speed and quality, one run.

Speed: one pair per call on 2 cores, interleaved rounds, two workloads (20 pairs of 256 tokens; 20 of mixed
40-250 tokens, as ``bench/bench_grade.py``). crag's contender is its own ``SessionPool`` on the shipped
``model.int8.onnx``, loaded as crag loads it (``CRAG_ONNX_REWRITES=auto``: signed int8 weights on VNNI CPUs,
NaN guards dropped, the mask skipped for unpadded pairs); OpenVINO runs two streams of one thread, pairs queued
asynchronously, in its default precision (bf16 on CPUs with AMX or AVX512-BF16, where OpenVINO picks it on
its own) and forced to f32, with int8 weights (``nncf.compress_weights``) and static int8 (``nncf.quantize``
calibrated on the mixed workload itself, the most favourable case for it).
Quality: every contender scores the recipe's held-out pairs (``<work>/heldout.jsonl``, domains never trained
on), AUROC per domain (relevant or partial vs irrelevant), and the largest logit difference from fp32.

The default ships int8 only, so the fp32 model is its cross-encoder rebuilt in torch from that file
(``training/start_weights.py``: int8 weights dequantised, checked against the bundle's scores) and exported;
make it once in crag's dev environment:
    python -c "import json; from pathlib import Path; from training.start_weights import model_from_bundle; \
from training.base_models import resolve_base; from training.export import _onnx_export; \
p=[json.loads(l) for l in open('runs/v3/val.jsonl')][:16]; \
m,_=model_from_bundle('default', resolve_base('default-base'), [(r['query'], r['text']) for r in p]); \
_onnx_export(m, Path('/tmp/ovm/default_fp32.onnx'))"
OpenVINO is not a dependency of crag: run this in its own environment,
    python -m venv /tmp/ov && /tmp/ov/bin/pip install openvino==2026.4.1 nncf==3.4.0 onnx && \
    /tmp/ov/bin/pip install -c constraints.txt -e '.[onnx]' scikit-learn

Run: /tmp/ov/bin/python bench/bench_openvino.py --fp32 /tmp/ovm/default_fp32.onnx [--work runs/v3] [--rounds 15]
     [--json bench/results_openvino.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import nncf
import numpy as np
import openvino as ov
from sklearn.metrics import roc_auc_score

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.factory import load_grader  # noqa: E402
from grader.load_rewrites import rewrites_in_use  # noqa: E402
from grader.session_pool import SessionPool  # noqa: E402

BUNDLE = ROOT / "models" / "bundles" / "default"
QUERY = "what does the grader return for a retrieved passage?"
WORDS = ("the", "grader", "reads", "a", "query", "and", "a", "retrieved", "passage", "and", "returns", "a",
         "calibrated", "probability", "that", "the", "passage", "answers", "the", "question", "while", "uncertain",
         "chunks", "go", "to", "an", "llm")
Feeds = dict[str, np.ndarray]
CRAG = "crag: onnxruntime int8 (shipped), pool of 2 one-thread sessions"


def encode(encoder, pairs: list[tuple[str, str]]) -> list[Feeds]:
    """One unpadded feed per pair, as crag's grader builds them (query fitted, text cut at the window)."""
    feeds: list[Feeds | None] = [None] * len(pairs)
    for batch in encoder.encode(pairs, batch_size=1, bucket=False):
        feeds[int(batch.index[0])] = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask,
                                      "token_type_ids": batch.token_type_ids}
    return [f for f in feeds if f is not None]


def workloads(encoder, n: int = 20) -> dict[str, list[Feeds]]:
    """20 pairs cut at 256 tokens and 20 of 40-250 tokens (words repeated from a fixed list)."""
    rng = np.random.default_rng(0)

    def text(words: int, offset: int) -> str:
        return " ".join(WORDS[(offset + j) % len(WORDS)] for j in range(words))

    return {"256 tokens": encode(encoder, [(QUERY, text(400, i)) for i in range(n)]),
            "mixed 40-250 tokens": encode(encoder, [(QUERY, text(int(w), i))
                                                    for i, w in enumerate(rng.integers(28, 235, n))])}


def ort_pool(path: Path) -> Callable[[list[Feeds]], np.ndarray]:
    """crag's own path: its session pool, one pair per call."""
    pool = SessionPool(path, 2)
    return lambda feeds: np.array(pool.map(lambda f: float(pool.run(f).ravel()[0]), feeds))


def ov_async(core: ov.Core, model, precision: str | None) -> Callable[[list[Feeds]], np.ndarray]:
    """OpenVINO's way: two streams of one thread, pairs queued asynchronously."""
    config = {"INFERENCE_NUM_THREADS": 2, "NUM_STREAMS": 2, "PERFORMANCE_HINT": "THROUGHPUT"}
    if precision:
        config["INFERENCE_PRECISION_HINT"] = precision
    compiled = core.compile_model(model, "CPU", config)
    requests = ov.AsyncInferQueue(compiled, 2)
    out: dict[int, float] = {}
    requests.set_callback(lambda request, i: out.__setitem__(i, float(request.get_output_tensor(0).data.ravel()[0])))

    def run(feeds: list[Feeds]) -> np.ndarray:
        out.clear()
        for i, feed in enumerate(feeds):
            requests.start_async(feed, i)
        requests.wait_all()
        return np.array([out[i] for i in range(len(feeds))])

    return run


def heldout(encoder, work: Path) -> dict[str, tuple[list[Feeds], np.ndarray]]:
    """The recipe's held-out pairs per domain: feeds and labels (relevant or partial = 1)."""
    by_domain: dict[str, list[dict]] = defaultdict(list)
    for line in (work / "heldout.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        by_domain[record["metadata"]["domain"]].append(record)
    return {domain: (encode(encoder, [(r["query"], r["text"]) for r in records]),
                     np.array([r["label"] != "irrelevant" for r in records], dtype=int))
            for domain, records in sorted(by_domain.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fp32", type=Path, required=True, help="the default's cross-encoder as fp32 ONNX")
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "v3")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    encoder = load_grader("default", threads=1).encoder
    work = workloads(encoder)
    core = ov.Core()
    contenders = {
        CRAG: ort_pool(BUNDLE / "model.int8.onnx"),
        "onnxruntime fp32, the same pool": ort_pool(args.fp32),
        "openvino, its default precision, 2 streams": ov_async(core, core.read_model(args.fp32), None),
        "openvino f32 forced, 2 streams": ov_async(core, core.read_model(args.fp32), "f32"),
        "openvino int8 weights (nncf.compress_weights), 2 streams":
            ov_async(core, nncf.compress_weights(core.read_model(args.fp32)), None),
        "openvino static int8 (nncf.quantize on the mixed workload), 2 streams":
            ov_async(core, nncf.quantize(core.read_model(args.fp32), nncf.Dataset(work["mixed 40-250 tokens"]),
                                         model_type=nncf.ModelType.TRANSFORMER, subset_size=20), None),
    }
    speed: dict[str, dict[str, dict[str, float]]] = {}
    for name, feeds in work.items():
        for fn in contenders.values():
            fn(feeds)  # warm-up
        samples: dict[str, list[float]] = {c: [] for c in contenders}
        for round_ in range(args.rounds):
            order = list(contenders.items())
            for contender, fn in order if round_ % 2 == 0 else order[::-1]:
                t0 = time.perf_counter()
                fn(feeds)
                samples[contender].append(time.perf_counter() - t0)
        base = samples[CRAG]
        speed[name] = {c: {"p50_ms": 1000 * statistics.median(v),
                           "speed_vs_crag": statistics.median(b / x for b, x in zip(base, v, strict=True))}
                       for c, v in samples.items()}
        for c, row in speed[name].items():
            print(f"{name:20s} {c:72s} p50 {row['p50_ms']:7.1f} ms  x{row['speed_vs_crag']:.2f}", file=sys.stderr)
    quality: dict[str, dict[str, float]] = {c: {} for c in contenders}
    fp32_name = "onnxruntime fp32, the same pool"
    for domain, (feeds, labels) in heldout(encoder, args.work).items():
        logits = {c: fn(feeds) for c, fn in contenders.items()}
        for c, values in logits.items():
            quality[c][f"auroc:{domain}"] = float(roc_auc_score(labels, values))
            quality[c]["max_logit_diff_vs_fp32"] = max(quality[c].get("max_logit_diff_vs_fp32", 0.0),
                                                       float(np.abs(values - logits[fp32_name]).max()))
    for c, row in quality.items():
        print(f"{c:72s} " + " ".join(f"{k.split(':')[-1]} {v:.3f}" for k, v in row.items()), file=sys.stderr)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    flags = next((line.split(":", 1)[1].split() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("flags")), [])
    report = {"versions": {"openvino": ov.__version__, "nncf": nncf.__version__},
              "machine": {"cpu": cpu, "cores": 2, "amx_int8": "amx_int8" in flags,
                          "avx512_bf16": "avx512_bf16" in flags, "avx512_vnni": "avx512_vnni" in flags,
                          "openvino_default_precision": str(core.get_property("CPU", "INFERENCE_PRECISION_HINT"))},
              "crag_onnx_rewrites": rewrites_in_use().describe(), "rounds": args.rounds,
              "speed": speed, "quality_on_heldout": quality}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
