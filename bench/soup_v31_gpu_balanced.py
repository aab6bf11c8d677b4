"""A model soup (Wortsman et al. 2022) tried for issue 10 and rejected (README, the GPU sweep bullet).

Half the shipped v3.1 cross-encoder (its int8 weights dequantised, as bench_wise_ft rebuilds them), half the
GPU sweep's balanced run at WiSE-FT a = 0.75, written as a float32 checkpoint for bench_wise_ft:

  python bench/gpu_recipe_sweep.py --join <the sweep's --out> runs/gpu2/model
  python bench/soup_v31_gpu_balanced.py
  python bench/bench_wise_ft.py --finetuned runs/soup/model --alpha 1 \\
      --json bench/results_soup_v31_gpu_balanced.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

BALANCED = Path("runs/gpu2/model")
OUT = Path("runs/soup/model")


def main() -> None:
    from bench_wise_ft import finetuned_state, wise_state

    from grader.factory import load_grader
    from grader.torch_model import build_cross_encoder, load_cross_encoder, save_cross_encoder
    from training.base_models import resolve_base

    model = build_cross_encoder(resolve_base("default-base"))
    base = {k: v.detach().clone() for k, v in model.state_dict().items()}
    v31, _ = finetuned_state(base, load_grader("default").bundle.file("model.int8.onnx"))
    balanced = {k: v.detach().clone() for k, v in load_cross_encoder(BALANCED).state_dict().items()}

    model.load_state_dict(wise_state(v31, wise_state(base, balanced, 0.75), 0.5))
    OUT.mkdir(parents=True, exist_ok=True)
    save_cross_encoder(model, OUT)
    manifest = json.loads((BALANCED / "manifest.json").read_text(encoding="utf-8"))
    manifest["training"]["soup"] = ("0.5 x v3.1's cross-encoder (int8, dequantised) + "
                                    "0.5 x (0.25 base + 0.75 the GPU sweep's balanced run)")
    (OUT / "manifest.json").write_text(json.dumps(manifest) + "\n", encoding="utf-8")
    print(OUT)


if __name__ == "__main__":
    main()
