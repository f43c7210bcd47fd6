#!/usr/bin/env bash
# Stop a vLLM server that scripts/start_vllm.sh PORT started in the background: SIGTERM to its
# process group (the API server and its engine process), SIGKILL after 15 s if anything is left.
set -euo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac
if [[ $# -ne 1 || ! "$1" =~ ^[0-9]+$ ]]; then echo "usage: $0 PORT" >&2; exit 2; fi
RUNDIR="${TWO_BENDS_VLLM_RUNDIR:-${TWO_BENDS_CACHE:-${HOME}/.cache/two-bends}/vllm-run}"
PIDF="${RUNDIR}/$1.pid"
[[ -f "$PIDF" ]] || { echo "no ${PIDF}: nothing to stop" >&2; exit 0; }
PID=$(cat "$PIDF")
if kill -TERM -- "-${PID}" 2>/dev/null; then
    for _ in $(seq 30); do kill -0 -- "-${PID}" 2>/dev/null || break; sleep 0.5; done
    if kill -0 -- "-${PID}" 2>/dev/null; then
        echo "still running after 15 s: SIGKILL" >&2; kill -KILL -- "-${PID}" 2>/dev/null || true
    fi
fi
rm -f "$PIDF"
echo "stopped vLLM on port $1 (process group ${PID})"
