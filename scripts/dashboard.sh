#!/usr/bin/env bash
# Run the Two Bends dashboard: sets up .venv on first use, converts the bundled model once, serves the app.
# Usage: scripts/dashboard.sh [--mode queue|batch] [--max-num-batched-tokens N] [--max-queue N] [--max-new-tokens N] [--max-batch N]
#                             [--model-threads N] [--fixed-threads] [--replay] [--dry-run]
#                             [--room [--code CODE] [--teacher-code CODE]]
#                             [--measure-hosts HOST[:PORT],...] [--engine-url URL]
#                             [streamlit args, e.g. --server.port 8501]
# Binds 127.0.0.1 (this machine only) unless told otherwise; an explicit --server.address ADDR is kept.
# --room: a workshop. Binds every interface (0.0.0.0) so a class can connect, and nothing opens without the join
#   code: generated at start (or --code CODE), printed with the room's URL and its QR code (also on the teacher
#   console and, large, in presenter mode). A second code (generated, or --teacher-code CODE) opens the teacher
#   console. Wrong codes are slowed down per browser and address. Codes: 4 to 64 letters or digits, any case.
# --mode queue (default): one request at a time, first come first served; batch: continuous batching.
# --max-num-batched-tokens N (batch mode, vLLM's name): tokens per engine step; a joining prompt is prefilled in
#   chunks that share steps with the riders' decode tokens (chunked prefill). Default: whole prefills.
# --model-threads N: torch threads for the model (default: every core). With the browser on the same small
#   machine (an instructor's laptop), cores - 1 leaves the page a core: its numbers then match
#   `python -m engine generate --threads N` (README, "Serving a room").
# --fixed-threads: every decode step on --model-threads threads. By default a run decodes with fewer while other
#   programs hold cores (its steps' CPU wait says so), chosen by measurement and shown per step (README, "Threads").
# --replay: recorded runs only (assets/traces/ and uploaded Trace JSON files); no model is converted or loaded.
# --dry-run: print the Streamlit command this would run and stop (no set-up, no model).
# --measure-hosts: the servers the "Measure a server" page may measure (off when not given: nobody in the
#   room can make the dashboard fetch an address the operator did not list).
# --engine-url URL: every Run goes to that OpenAI-compatible server (vLLM on a GPU box, or several behind a load
#   balancer) instead of the local engine, timed from outside as `engine measure` does; its host must be on
#   --measure-hosts. The local engine stays for the attention and KV views (an untimed replay, same model only).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOM=0
DRY_RUN=0
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) export TWO_BENDS_MODE="$2"; shift 2 ;;
    --max-queue) export TWO_BENDS_MAX_QUEUE="$2"; shift 2 ;;
    --max-new-tokens) export TWO_BENDS_MAX_NEW_TOKENS="$2"; shift 2 ;;
    --max-batch) export TWO_BENDS_MAX_BATCH="$2"; shift 2 ;;
    --max-num-batched-tokens) export TWO_BENDS_MAX_NUM_BATCHED_TOKENS="$2"; shift 2 ;;
    --model-threads) export TWO_BENDS_THREADS="$2"; shift 2 ;;
    --fixed-threads) export TWO_BENDS_FIXED_THREADS=1; shift ;;
    --replay) export TWO_BENDS_REPLAY=1; shift ;;
    --room) ROOM=1; export TWO_BENDS_ROOM=1; shift ;;
    --code) export TWO_BENDS_JOIN_CODE="${2:-}"; shift 2 ;;
    --teacher-code) export TWO_BENDS_TEACHER_CODE="${2:-}"; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    --measure-hosts) export TWO_BENDS_MEASURE_HOSTS="$2"; shift 2 ;;
    --engine-url) export TWO_BENDS_ENGINE_URL="$2"; shift 2 ;;
    *) break ;;
  esac
done
case "${TWO_BENDS_THREADS:-0}" in
  ''|*[!0-9]*) echo "error: --model-threads must be a whole number, 0 = every core (got '${TWO_BENDS_THREADS}')" >&2; exit 2 ;;
esac
case "${TWO_BENDS_MAX_NUM_BATCHED_TOKENS:-}" in
  *[!0-9]*) echo "error: --max-num-batched-tokens must be a whole number of tokens (got '${TWO_BENDS_MAX_NUM_BATCHED_TOKENS}')" >&2; exit 2 ;;
esac
case "${TWO_BENDS_MODE:-queue}" in
  queue|batch) ;;
  *) echo "error: --mode must be queue or batch (got '${TWO_BENDS_MODE}')" >&2; exit 2 ;;
esac
# Safe by default: this machine only. Streamlit itself binds every interface when no address is given.
ADDRESS=127.0.0.1
for arg in "$@"; do
  case "$arg" in --server.address|--server.address=*) ADDRESS="" ;; esac
done
if [ "$ROOM" = "1" ]; then
  [ -z "$ADDRESS" ] && { echo "error: give --room or --server.address, not both" >&2; exit 2; }
  ADDRESS=0.0.0.0
  echo "[dashboard] --room: listening on every network interface (0.0.0.0); every page needs the room's join code" \
       "(printed below with the URL and QR code when the server starts)." >&2
  for pair in "--code:${TWO_BENDS_JOIN_CODE:-}" "--teacher-code:${TWO_BENDS_TEACHER_CODE:-}"; do
    flag="${pair%%:*}"; code="${pair#*:}"; bare="${code//[ 	-]/}"  # as ui/classroom/config.py reads it
    if [ -n "$code" ] && { [ ${#bare} -lt 4 ] || [ ${#bare} -gt 64 ]; }; then
      echo "error: $flag needs 4 to 64 letters or digits (got ${#bare})" >&2; exit 2
    fi
  done
elif [ -n "${TWO_BENDS_JOIN_CODE:-}${TWO_BENDS_TEACHER_CODE:-}" ]; then
  echo "error: --code and --teacher-code are for a room: add --room" >&2; exit 2
fi
check_engine_url() {  # the room's serving engine must be on the operator's allow-list, or the dashboard does not start
  [ -z "${TWO_BENDS_ENGINE_URL:-}" ] && return 0
  ENGINE_URL=$(.venv/bin/python -m ui.engine_link.remote_engine --check --url="$TWO_BENDS_ENGINE_URL") || exit 2
  echo "[dashboard] every Run goes to the serving engine at ${ENGINE_URL} (timed from outside, as engine measure does)"
}
CMD=(.venv/bin/python -m ui.controls.launch --browser.gatherUsageStats false)
[ -n "$ADDRESS" ] && CMD+=(--server.address "$ADDRESS")
CMD+=("$@")
if [ "$DRY_RUN" = "1" ]; then
  [ "$ROOM" = "1" ] && echo "TWO_BENDS_ROOM=1"
  [ -x .venv/bin/python ] && check_engine_url
  echo "${CMD[*]}"
  exit 0
fi
bash scripts/setup.sh
check_engine_url
if [ "${TWO_BENDS_REPLAY:-}" = "1" ]; then
  echo "[dashboard] replay mode: recorded runs only, no model is loaded"
else
  echo "[dashboard] preparing the bundled SmolLM2 model (first time: about a minute)"
  .venv/bin/python -m engine prepare
  echo "[dashboard] scheduling mode: ${TWO_BENDS_MODE:-queue}${TWO_BENDS_MAX_NUM_BATCHED_TOKENS:+, chunked prefill: ${TWO_BENDS_MAX_NUM_BATCHED_TOKENS} tokens a step}"
  [ -n "${TWO_BENDS_MEASURE_HOSTS:-}" ] && echo "[dashboard] the Measure a server page may measure: ${TWO_BENDS_MEASURE_HOSTS}"
fi
exec "${CMD[@]}"
