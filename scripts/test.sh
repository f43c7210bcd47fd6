#!/usr/bin/env bash
# Run every check: lint, then the whole pytest suite (engine, figures, pages, real browser).
# Sets up .venv with the dev tools and Debian's Chromium for the browser test on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
if [ ! -x /usr/bin/chromium ]; then
  echo "[test] installing Debian's chromium for the browser test"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi
.venv/bin/python -m ruff check .
.venv/bin/python -m engine prepare
exec .venv/bin/python -m pytest -q "$@"
