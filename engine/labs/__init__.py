"""Measurements the dashboard's labs run on this machine: sweeps, batches, remedies, the profiler, this
machine's own peaks and the `python -m engine bench` comparison."""
