#!/usr/bin/env bash
# Prove the CUDA path in one call on any machine with an NVIDIA GPU: parity with transformers, CUDA-graph decode,
# the bench in float32 and bfloat16, and two recorded GPU traces. Usage, on that machine, from the clone:
#   bash scripts/gpu_check.sh                 (OUT=DIR to choose the folder, PYTHON=... the interpreter)
# Needs: an NVIDIA driver (nvidia-smi), and for $PYTHON (default python3) a CUDA build of torch plus the
#   packages of requirements.txt (transformers, tokenizers, safetensors, numpy...); no network once installed.
#   With the converted model in the cache (`python -m engine prepare`, or TWO_BENDS_CACHE pointing at a copy)
#   the bench and traces use the real SmolLM2 weights; without it, SmolLM2's shapes with random weights
#   (the same bytes and FLOPs, gibberish text); the report says which.
# Writes, under $OUT (default ./gpu-check): environment.txt (GPU, driver, package versions), gpu_check.log
#   (everything printed), gpu_check.txt (the report), gpu_check.json (every number), gpu-*.json (Trace files,
#   open them in the dashboard or copy them to assets/traces/). Takes a few minutes; stopped after 9.
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
        print(name, "MISSING: install it (requirements.txt; torch as a CUDA build)")
PYEOF
} 2>&1 | tee "$OUT/environment.txt"
# the model cache when this machine has one (TWO_BENDS_CACHE or ~/.cache/two-bends); else SmolLM2's shapes, random weights
timeout 540 $PY -m engine.labs.gpu_check --out "$OUT" 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
