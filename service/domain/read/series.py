"""The series of the console (console.md, *Series*): what the cluster looks like at a position, in
a few numbers, and which positions a series of P points samples. Pure: the application folds the
stream and calls these."""
from __future__ import annotations

from typing import Any

import numpy as np

from service.domain.model import events as ev
from service.domain.model.quantity import PODS, format_quantity
from service.domain.state.cluster import ClusterState

PREEMPTION_TYPES = frozenset({ev.POD_GROUP_PREEMPTED})
LOSS_TYPES = frozenset({ev.PODS_LOST})


def sample_positions(start: int, end: int, points: int) -> list[int]:
    """Up to `points` positions spread evenly over [start, end], both ends included: every
    position when there are no more than `points` of them; with one point, `end`."""
    if end < start:
        return []
    span = end - start
    if span + 1 <= points:
        return list(range(start, end + 1))
    if points == 1:
        return [end]
    return [start + (i * span) // (points - 1) for i in range(points)]


def point(state: ClusterState) -> dict[str, Any]:
    """The state's numbers: pods placed, groups pending, and per resource that a live node
    declares the sum of what is allocated and of what is allocatable over the live nodes."""
    nodes = state.nodes
    rows = nodes.count
    alive = nodes.alive[:rows]
    allocated: dict[str, str] = {}
    allocatable: dict[str, str] = {}
    for resource, col in sorted(nodes.resources.items()):
        declared = alive & nodes.declared[:rows, col]
        if not declared.any():
            continue
        counted = declared if resource == PODS else alive  # a node without `pods` does not count them
        allocatable[resource] = format_quantity(int(np.sum(nodes.alloc[:rows, col][declared])), resource)
        allocated[resource] = format_quantity(int(np.sum(nodes.used[:rows, col][counted])), resource)
    return {"placedPods": sum(g.placed for g in state.running.values()),
            "pendingGroups": len(state.queue),
            "allocated": allocated, "allocatable": allocatable}
