#!/usr/bin/env bash
# Run the Two Bends dashboard: sets up .venv on first use, converts the bundled model once, serves the app.
# Usage: scripts/dashboard.sh [extra streamlit args, e.g. --server.port 8502]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "[dashboard] preparing the bundled SmolLM2 model (first time: about a minute)"
.venv/bin/python -m engine prepare
exec .venv/bin/python -m streamlit run app.py --browser.gatherUsageStats false "$@"
