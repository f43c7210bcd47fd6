#!/usr/bin/env bash
# Run every check: lint, then the whole pytest suite (engine, figures, pages, real browser, a real vLLM).
# Sets up .venv with the dev tools and Debian's Chromium for the browser test on first use, and vLLM's
# CPU build in its own venv outside the clone (scripts/setup_vllm.sh: a few minutes and ~3.4 GB once,
# reused by every checkout). TWO_BENDS_SKIP_VLLM=1 leaves vLLM out (its tests then skip, saying why).
set -euo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
# The browser tests drive Debian's chromium-headless-shell (the same Blink as `chromium`, without the full browser's
# processes: docs/decisions/headless-shell.md); the benchmarks drive `chromium`. Where the shell cannot be installed,
# the tests take `chromium` too.
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromium-headless-shell ]; then
  echo "[test] installing Debian's chromium and chromium-headless-shell for the browser tests"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && { $SUDO apt-get install -y -qq chromium chromium-headless-shell >/dev/null \
    || $SUDO apt-get install -y -qq chromium >/dev/null; }
fi
# Python keeps compiled bytecode (__pycache__/, ignored by git) even where the environment says not to write it: the
# suite starts many Python processes, and without it each compiles the project's modules again and pytest rewrites
# every test module's asserts again (a full collection: 10.0 s of CPU, 5.4 s with the bytecode kept).
unset PYTHONDONTWRITEBYTECODE
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
# tests stay on one worker, in order, longest files first: tests/conftest.py), and beside it, as one more process,
# the fallbacks forced in one place (--backends=plain: plain nn.Linear, the eager decode step, no C, no compile) on the
# paths a user's run takes: the model against transformers, queue and batch, the story pages' runs. Its ~20 s of work
# fills cores the parallel part leaves idle while its tests wait on servers and timers; its threads sleep at barriers
# (OMP_WAIT_POLICY=PASSIVE, as the xdist workers' do) and its report follows the parallel part's. Then the tests marked
# `alone` (a real browser or vLLM), and last among them the `timed` ones, which set up beside the other worker's last
# unit and measure once it has ended and the cores are quiet. Timings of each part: docs/performance.md, "The test
# suite".
WORKERS=$(( $(nproc) < 4 ? $(nproc) : 4 ))
status=0
fallbacks_log=$(mktemp)
OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m pytest -q -rs -n 0 --backends=plain -m "not alone" \
  tests/engine/core/test_model_parity.py tests/engine/core/test_reference.py tests/pages/story/test_prefill_decode.py \
  tests/engine/test_smollm_end_to_end.py::test_greedy_tokens_are_the_same_alone_queued_and_batched \
  > "$fallbacks_log" 2>&1 &
fallbacks=$!
trap 'kill "$fallbacks" 2>/dev/null || true' EXIT  # interrupted: the fallbacks' run stops too
.venv/bin/python -m pytest -q -rs -n "$WORKERS" --dist loadfile -m "not alone" || status=$?
fallbacks_status=0
wait "$fallbacks" || fallbacks_status=$?
echo "[test] the fallbacks forced (--backends=plain), run beside the part above:"
cat "$fallbacks_log"
rm -f "$fallbacks_log"
status=$(( status ? status : fallbacks_status ))
# The real browsers and vLLM, a file per worker (its dashboard, or the one shared vLLM, starts once), as many workers
# as cores and nothing beside them: with a third worker on 2 cores,
# vLLM's TTFT as our client saw it drifted 21 % from vLLM's own histogram. The tests that measure against the
# machine's own quiet numbers (`timed`) come last and wait for the machine to themselves (tests/other_workers.py).
.venv/bin/python -m pytest -q -rs -n "$WORKERS" --dist loadfile --alone-only -m alone \
  || status=$(( status ? status : $? ))
exit "$status"
