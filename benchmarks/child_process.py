"""Runs one benchmark measurement in a fresh process (`python -m MODULE
'<json spec>'`) and returns the JSON object of its last `{`-line, or
{"error": ...} with the child's last error line."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_json_child(module: str, spec: dict, cache_dir: str, timeout: float) -> dict:
    # Every compiler starts from the same empty on-disk cache (`cache_dir`):
    # ours, and inductor's in a subdirectory of it.
    env = dict(os.environ, TORCH_MLIR_FLEX_CACHE_DIR=cache_dir,
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"), PYTHONPATH=os.pathsep.join(
        [os.path.join(ROOT, "python"), ROOT, os.environ.get("PYTHONPATH", "")]))
    try:
        p = subprocess.run([sys.executable, "-m", module, json.dumps(spec)], cwd=ROOT,
                           env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode or not lines:
        text = (p.stderr or p.stdout).strip().splitlines()
        errors = [l for l in text if "Error" in l and not l.startswith(" ")]
        return {"error": (errors[-1] if errors else " / ".join(text[-3:]))[:300]}
    return json.loads(lines[-1])
