#!/usr/bin/env bash
# Serve our SmolLM2 weights with vLLM (CPU build) on 127.0.0.1:PORT, for side-by-side measurements.
# Usage: scripts/start_vllm.sh PORT [--foreground] [--chunked-prefill on|off] [more vLLM arguments]
#
# Runs scripts/setup_vllm.sh first (instant once done). Flags chosen for a fair comparison with our
# engine: float32, prefix caching off, a 2048-token context, 1 GiB of KV cache, --enforce-eager
# (start-up ~1 min on 2 cores instead of 4-6: vLLM 0.32's compiled mode warms up torch.compile on
# every start, because its compile cache fails to reload; TWO_BENDS_VLLM_COMPILE=1 asks for it).
# Threads: by default vLLM runs the model on ONE OpenMP thread (core 0) and keeps the other core for
# its API process; set VLLM_CPU_OMP_THREADS_BIND=0-1 to give the model as many cores as our engine.
#
# Background (default): starts the server in its own process group (log and pid in
# $TWO_BENDS_VLLM_RUNDIR/PORT.{log,pid}), waits for /health and exits 0 when it answers, 1 if the
# server died or is not up within VLLM_START_TIMEOUT seconds (default 400). Stop it with
# scripts/stop_vllm.sh PORT. --foreground: exec the server in place (the caller owns the process).
# --chunked-prefill on: vLLM's chunked prefill with a token budget per step of TWO_BENDS_VLLM_CHUNK tokens
# (default 256; --max-num-batched-tokens), so a long prompt is cut into pieces that ride along the decode steps;
# off: no chunking (the budget is the whole 2048-token context, as vLLM requires then). Neither: vLLM's default
# (on, with its CPU budget of 2048 tokens per step, so prompts up to 2048 tokens are never cut).
# Other knobs: TWO_BENDS_VLLM_VENV, TWO_BENDS_VLLM_MODEL (see setup_vllm.sh), TWO_BENDS_VLLM_NAME
# (served model name, default smollm2-135m-instruct), VLLM_CPU_KVCACHE_SPACE (GiB, default 1).
set -euo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac
if [[ $# -lt 1 || ! "$1" =~ ^[0-9]+$ ]]; then
    echo "usage: $0 PORT [--foreground] [more vLLM arguments]" >&2; exit 2
fi
PORT="$1"; shift
FOREGROUND=0
[[ "${1:-}" == "--foreground" ]] && { FOREGROUND=1; shift; }
CHUNKED=()
if [[ "${1:-}" == "--chunked-prefill" ]]; then
    case "${2:-}" in
        on) CHUNKED=(--enable-chunked-prefill --max-num-batched-tokens "${TWO_BENDS_VLLM_CHUNK:-256}") ;;
        off) CHUNKED=(--no-enable-chunked-prefill --max-num-batched-tokens 2048) ;;
        *) echo "usage: $0 PORT [--foreground] [--chunked-prefill on|off] [more vLLM arguments]" >&2; exit 2 ;;
    esac
    shift 2
fi

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${TWO_BENDS_CACHE:-${HOME}/.cache/two-bends}"
VENV="${TWO_BENDS_VLLM_VENV:-${CACHE}/vllm-cpu-venv}"
MODEL="${TWO_BENDS_VLLM_MODEL:-${CACHE}/smollm2-135m-hf}"
NAME="${TWO_BENDS_VLLM_NAME:-smollm2-135m-instruct}"
RUNDIR="${TWO_BENDS_VLLM_RUNDIR:-${CACHE}/vllm-run}"
TIMEOUT="${VLLM_START_TIMEOUT:-400}"

bash "${HERE}/setup_vllm.sh" >&2
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # everything is local

# Not the `vllm` command: it looks for a distribution named "vllm", finds only "vllm-cpu", and exits.
CMD=("${VENV}/bin/python" -m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name "$NAME"
     --host 127.0.0.1 --port "$PORT" --dtype float32 --max-model-len 2048 --no-enable-prefix-caching)
[[ "${TWO_BENDS_VLLM_COMPILE:-0}" == 1 ]] || CMD+=(--enforce-eager)
CMD+=("${CHUNKED[@]}" "$@")
echo "+ VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE}${VLLM_CPU_OMP_THREADS_BIND:+ VLLM_CPU_OMP_THREADS_BIND=${VLLM_CPU_OMP_THREADS_BIND}} ${CMD[*]}" >&2
[[ "$FOREGROUND" == 1 ]] && exec "${CMD[@]}"

if curl -s -o /dev/null --max-time 2 "http://127.0.0.1:${PORT}/health"; then
    echo "something already answers on 127.0.0.1:${PORT}" >&2; exit 1
fi
mkdir -p "$RUNDIR"
LOG="${RUNDIR}/${PORT}.log"; PIDF="${RUNDIR}/${PORT}.pid"
setsid "${CMD[@]}" > "$LOG" 2>&1 < /dev/null &  # its own process group: one signal stops its engine child too
PID=$!
echo "$PID" > "$PIDF"
echo "vLLM pid ${PID}, log ${LOG}" >&2
for ((waited = 0; ; waited++)); do
    if [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:${PORT}/health" || true)" == 200 ]]; then
        echo "ready after ~${waited} s: http://127.0.0.1:${PORT}/v1 (model \"${NAME}\")"; exit 0
    fi
    if ! kill -0 "$PID" 2>/dev/null; then
        echo "vLLM exited during start-up after ~${waited} s; its last log lines:" >&2
        tail -25 "$LOG" >&2; rm -f "$PIDF"; exit 1
    fi
    if (( waited >= TIMEOUT )); then
        echo "vLLM not ready after ${TIMEOUT} s (VLLM_START_TIMEOUT); stopping it. Its last log lines:" >&2
        tail -25 "$LOG" >&2
        kill -TERM -- "-${PID}" 2>/dev/null || true; sleep 5; kill -KILL -- "-${PID}" 2>/dev/null || true
        rm -f "$PIDF"; exit 1
    fi
    sleep 1
done
