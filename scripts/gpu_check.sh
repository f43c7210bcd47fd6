#!/usr/bin/env bash
# Prove the CUDA path in one call on a lent GPU machine (no network there): parity, CUDA-graph decode,
# the bench in float32 and bfloat16, and recorded GPU traces. Writes everything under $OUT (or ./gpu-check).
# Usage (device tool): bash scripts/gpu_check.sh        Runs in well under 10 minutes on an H200.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
  $PY - <<'PYEOF'
import importlib
for name in ("torch", "transformers", "tokenizers", "safetensors", "numpy"):
    try:
        print(name, importlib.import_module(name).__version__)
    except ImportError:
        print(name, "MISSING: carry its wheel (see the device tool's README, '.whl' and carry)")
PYEOF
} 2>&1 | tee "$OUT/environment.txt"
# the model cache, when a run carried one (TWO_BENDS_CACHE); else the check uses SmolLM2's shapes with random weights
timeout 540 $PY -m engine.labs.gpu_check --out "$OUT" 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
