#!/usr/bin/env bash
# Prove the CUDA path in one call on any machine with an NVIDIA GPU, as checks that pass or fail: parity with
# transformers, CUDA-graph decode = eager tokens, the bench in float32 and bfloat16, two recorded GPU traces.
# Usage, on that machine, from the clone:
#   bash scripts/gpu_check.sh                 (OUT=DIR to choose the folder, PYTHON=... the interpreter)
# Exit status: 0 only when every check passed; 1 a check failed; 2 no GPU or no CUDA torch; 3 a package missing
#   or older than the floor below; 124 stopped by the time limit (the checks that finished are on disk).
# Uses the torch and transformers already installed when new enough (the floors below, not requirements.txt's
#   pins: a GPU image's own CUDA torch is the one to test) and installs nothing large: never torch. Only when
#   SMALL_INSTALL=1 and a small package (transformers, tokenizers, safetensors) is missing does it try pip, with
#   the pinned version, and fail cleanly (status 3) when that cannot reach a package index.
# With the converted model in the cache (`python -m engine prepare`, or TWO_BENDS_CACHE pointing at a copy) the
#   bench and traces use the real SmolLM2 weights; without it, SmolLM2's shapes with random weights (the same
#   bytes and FLOPs, gibberish text); the report says which.
# Writes, under $OUT (default ./gpu-check), each line the moment it is known: environment.txt (GPU, driver,
#   package versions), gpu_check.txt (one PASS/FAIL/INFO line per check, then the summary), gpu_check.jsonl (the
#   same as JSON records), gpu_check.log (everything printed), at the end gpu_check.json (every number), and
#   gpu-*.json (Trace files: open them in the dashboard or copy them to assets/traces/). Fits a 10-minute run:
#   the checks are stopped after LIMIT_S (default 540) seconds.
set -uo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-check}
PY=${PYTHON:-python3}
LIMIT_S=${LIMIT_S:-540}
mkdir -p "$OUT"
: > "$OUT/gpu_check.txt"

fail() {  # status, then the reason: written to gpu_check.txt too, so the folder alone tells what happened
  echo "FAIL $2" | tee -a "$OUT/gpu_check.txt" >&2
  exit "$1"
}

command -v nvidia-smi >/dev/null || fail 2 "nvidia-smi: no NVIDIA driver on this machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$OUT/environment.txt"

# floors: torch 2.5 (scaled_dot_product_attention's enable_gqa), transformers 4.46 (GPT2/Llama configs and logits
# as the parity check reads them); the pins in requirements.txt are what CI runs
"$PY" - "$OUT/environment.txt" <<'PYEOF'
import sys
from importlib import metadata

FLOORS = {"torch": "2.5", "transformers": "4.46", "tokenizers": "0.20", "safetensors": "0.4", "numpy": "1.24"}


def key(version: str) -> tuple:
    parts = []
    for piece in version.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


with open(sys.argv[1], "a") as env:
    for name, floor in FLOORS.items():
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = None
        ok = version is not None and key(version) >= key(floor)
        line = f"{name} {version or 'MISSING'} (needs >= {floor}){'' if ok else '  <- too old or missing'}"
        print(line, flush=True)
        env.write(line + "\n")
PYEOF
bad=$(grep -c "<- too old or missing" "$OUT/environment.txt" || true)
if [ "$bad" != "0" ]; then
  missing=$(grep "<- too old or missing" "$OUT/environment.txt" | cut -d' ' -f1 | tr '\n' ' ')
  small_only=1
  for name in $missing; do
    case "$name" in transformers|tokenizers|safetensors) ;; *) small_only=0 ;; esac
  done
  if [ "${SMALL_INSTALL:-0}" = "1" ] && [ "$small_only" = "1" ]; then
    pins=$(grep -E "^($(echo "$missing" | xargs | tr ' ' '|'))==" requirements.txt | tr '\n' ' ')
    echo "installing the small packages: $pins" | tee -a "$OUT/environment.txt"
    timeout 180 "$PY" -m pip install --no-deps $pins >>"$OUT/environment.txt" 2>&1 \
      || fail 3 "packages: $missing could not be installed (no package index reachable?); install them and rerun"
  else
    fail 3 "packages: $missing missing or older than the floors (environment.txt); torch is never installed here"
  fi
fi
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
  || fail 2 "cuda: this torch cannot see a CUDA GPU (a CPU build, or a driver too old for it)"

timeout "$LIMIT_S" "$PY" -m engine.labs.gpu_check --out "$OUT" 2>&1 | tee "$OUT/gpu_check.log"
status=${PIPESTATUS[0]}
if [ "$status" = "124" ]; then
  fail 124 "time: stopped after $LIMIT_S s; the checks above finished and are kept, the rest did not run"
fi
exit "$status"
