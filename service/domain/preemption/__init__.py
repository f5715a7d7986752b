"""Workload-aware preemption: victim units, the search over units, flat preemption."""
