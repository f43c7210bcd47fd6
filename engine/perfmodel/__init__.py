"""The performance model, pure arithmetic: FLOPs and bytes per phase, the roofline, the TTFT fit and Old
Qin's budget (Amdahl). Every derived number the dashboard shows is computed here, once."""
