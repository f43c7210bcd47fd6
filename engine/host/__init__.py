"""The machine the engine runs on, watched from outside the teaching core: the CPU time other programs take from it.

cpu_wait (run-queue wait per thread), proc_stat (idle time), machine_load (other programs' recent load) and
thread_governor (fewer threads while they hold cores), combined for one run by run_watch.RunWatch, which
engine/core/generate.py takes as its optional `watch`. Linux only; elsewhere they measure nothing and say so.
"""
