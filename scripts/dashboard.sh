#!/usr/bin/env bash
# Run the Two Bends dashboard: sets up .venv on first use (scripts/setup.sh), then `two-bends dashboard`, which converts
# the bundled model once and serves the app on http://127.0.0.1:8501 (this machine only; --room opens it to a class).
# Usage: scripts/dashboard.sh [--mode queue|batch] [--room [--code CODE]] ... [streamlit args, e.g. --server.port 8501]
#   every option: scripts/dashboard.sh --help (the options live in two_bends_cli.py); the guide: docs/teacher-guide.md
set -euo pipefail
cd "$(dirname "$0")/.."
case " $* " in
  *" --dry-run "*|" -h "*|" --help "*) ;;  # print only: nothing to install
  *) bash scripts/setup.sh ;;
esac
exec .venv/bin/python -m two_bends_cli dashboard "$@"
