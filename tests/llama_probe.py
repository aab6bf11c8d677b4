"""Exit 0 when llama.cpp can answer one chat turn with SmolLM2 on this CPU, 1 otherwise (used by .ci/run)."""

import subprocess
import sys

CODE = """
from tests import llama_server
from llama_cpp import Llama
llm = Llama(model_path=str(llama_server.gguf_path()), n_ctx=512, n_threads=2, verbose=False)
llm.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=2)
"""

if __name__ == "__main__":
    result = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        sys.stderr.write(f"llama.cpp probe failed (exit {result.returncode}): {result.stderr[-500:]}\n")
    sys.exit(0 if result.returncode == 0 else 1)
