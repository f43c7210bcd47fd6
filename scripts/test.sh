#!/usr/bin/env bash
# Run every check: lint, then the whole pytest suite (engine, figures, pages, real browser, a real vLLM).
# Sets up .venv with the dev tools and Debian's Chromium for the browser test on first use, and vLLM's
# CPU build in its own venv outside the clone (scripts/setup_vllm.sh: a few minutes and ~3.4 GB once,
# reused by every checkout). TWO_BENDS_SKIP_VLLM=1 leaves vLLM out (its tests then skip, saying why).
set -euo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
if [ ! -x /usr/bin/chromium ]; then
  echo "[test] installing Debian's chromium for the browser test"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi
.venv/bin/python -m ruff check .
.venv/bin/python -m engine prepare
if [ "${TWO_BENDS_SKIP_VLLM:-0}" != 1 ]; then
  bash scripts/setup_vllm.sh
  export TWO_BENDS_REQUIRE_VLLM=1  # installed: a vLLM that does not start fails its tests instead of skipping
fi
if [ $# -gt 0 ]; then  # a chosen part (paths, -k, -x ...): one pytest run of it, one test at a time
  exec .venv/bin/python -m pytest -q -rs "$@"
fi
# The whole suite in parts. First everything but the real browsers and vLLM, on every core (pytest-xdist; a file's
# tests stay on one worker, in order): many of these wait on one-threaded work (a subprocess importing torch, a server
# starting), so two at a time finish in ~60 % of the time on 2 cores (docs/performance.md, "The test suite"). Then
# the fallbacks forced, then the tests marked `alone` (a browser or vLLM: tests/conftest.py), then `timed` ones.
WORKERS=$(( $(nproc) < 4 ? $(nproc) : 4 ))
status=0
.venv/bin/python -m pytest -q -rs -n "$WORKERS" --dist loadfile -m "not alone" || status=$?
# The fallbacks, forced in one place (--backends=plain: plain nn.Linear, the eager decode step, no C, no compile), on
# the paths a user's run takes: the model against transformers, queue and batch, the story pages' runs.
.venv/bin/python -m pytest -q -rs -n "$WORKERS" --dist loadfile --backends=plain -m "not alone" \
  tests/engine/core/test_model_parity.py tests/engine/core/test_reference.py tests/pages/story/test_prefill_decode.py \
  tests/engine/test_smollm_end_to_end.py::test_greedy_tokens_are_the_same_alone_queued_and_batched || status=$(( status ? status : $? ))
# The real browsers and vLLM, two files at a time: each mostly waits on its servers and its page (two browser files
# took 58 s of CPU in 86 s: 0.67 of a core); a file's tests stay on one worker, so its dashboard (or the shared vLLM)
# starts once. Last, alone, the tests that measure against the machine's own quiet numbers.
.venv/bin/python -m pytest -q -rs -n "$WORKERS" --dist loadfile -m "alone and not timed" || status=$(( status ? status : $? ))
.venv/bin/python -m pytest -q -rs -m timed || status=$(( status ? status : $? ))
exit "$status"
