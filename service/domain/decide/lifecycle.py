"""accept for a job's life (lifecycle.md): finished pods reported, sizes changed.

A body here is valid in shape (service/schemas/lifecycle.py); these check it against the state
and give the input event, or a Rejection that records nothing over HTTP.
"""
from __future__ import annotations

from typing import Any

from service.domain.model import events as ev
from service.domain.model.rejection import Accepted, Rejection
from service.domain.state.cluster import ClusterState, Workload


def live_workload(state: ClusterState, namespace: str, name: str) -> Workload | Rejection:
    wl = state.workloads.get((namespace, name))
    if wl is None:
        return Rejection(404, "NotFound", f"workload {namespace}/{name} not found")
    if wl.deleted_at is not None:
        return Rejection(409, "WorkloadDeleted",
                         f"workload {namespace}/{name} was deleted at position {wl.deleted_at}")
    return wl


def finish_pods(state: ClusterState, name: str, namespace: str | None, body: dict[str, Any]) -> Accepted | Rejection:
    """PodsFinished: every named pod is Running (lifecycle.md *Reporting finished pods*)."""
    ns = namespace or ""
    wl = live_workload(state, ns, name)
    if isinstance(wl, Rejection):
        return wl
    by_name = {g.spec.name: g for g in wl.groups}
    names = state.nodes.names
    pods = []
    for i, p in enumerate(body["pods"]):
        g = by_name.get(p["podGroup"])
        if g is None:
            return Rejection(422, "UnknownPodGroup", f"workload {ns}/{name} has no pod group {p['podGroup']!r}",
                             ("body", "pods", i, "podGroup"))
        try:
            pod = g.pod_index(p["name"])
        except KeyError:
            return Rejection(422, "UnknownPod", f"pod group {p['podGroup']!r} of workload {ns}/{name} "
                             f"has no pod {p['name']!r}", ("body", "pods", i, "name"))
        node = g.node_of[pod]
        if node < 0:
            phase = g.phase_of(pod)
            why = "it did not run" if phase == "Pending" else "a finished pod is final"
            return Rejection(409, "PodNotRunning", f"pod {p['podGroup']}/{p['name']} is {phase}, not Running: {why}",
                             ("body", "pods", i, "name"))
        pods.append({"podGroup": p["podGroup"], "pod": p["name"], "phase": p["phase"], "node": names[node]})
    return ev.PODS_FINISHED, {"namespace": ns, "workload": name, "pods": pods}
