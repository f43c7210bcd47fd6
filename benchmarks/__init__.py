"""The benchmarks the docs cite: each measures on this machine and prints ratios measured side by side.

Run one from the checkout as `.venv/bin/python -m benchmarks.NAME --help` (docs/performance.md lists them)."""
