"""A tiny driver for the decider: commands in, events out, state kept."""
from __future__ import annotations

import json
from typing import Any

from service.domain import ClusterState, Event, Rejection, accept, evolve, handle
from service.domain.read.views import canonical, node_view, workload_view


def pods(count: int = 1, name: str = "p", **requests: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "count": count}
    if requests:
        entry["requests"] = {k.replace("_", "."): v for k, v in requests.items()}
    return entry


def gang(name: str, min_count: int, *entries: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"gang": {"minCount": min_count}}, "pods": list(entries), **extra}


def basic(name: str, *entries: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"basic": {}}, "pods": list(entries), **extra}


class Sim:
    def __init__(self, cluster: str = "c1") -> None:
        self.state = ClusterState(cluster)
        self.events: list[Event] = []
        self.last: list[Event] = []

    def run(self, kind: str, name: str, namespace: str | None = None, body: dict | None = None) -> list[Event]:
        accepted = accept(self.state, kind, name, namespace, body)
        if isinstance(accepted, Rejection):
            raise AssertionError(f"rejected: {accepted}")
        etype, data = accepted
        data = json.loads(json.dumps(data))  # what the store gives back
        inp = Event(self.state.position + 1, etype, data)
        decisions = handle(self.state, inp)
        self.events.append(inp)
        self.events.extend(decisions)
        self.last = decisions
        return decisions

    # -- commands ---------------------------------------------------------------------
    def node(self, name: str, labels: dict | None = None, unschedulable: bool = False, **alloc: Any) -> list[Event]:
        allocatable = {k.replace("_", "."): v for k, v in alloc.items()}
        return self.run("UpsertNode", name, body={"labels": labels or {}, "allocatable": allocatable,
                                                  "unschedulable": unschedulable})

    def remove_node(self, name: str) -> list[Event]:
        return self.run("RemoveNode", name)

    def submit(self, name: str, *groups: dict, ns: str = "default", **extra: Any) -> list[Event]:
        return self.run("SubmitWorkload", name, ns, {"name": name, "podGroups": list(groups), **extra})

    def delete(self, name: str, ns: str = "default") -> list[Event]:
        return self.run("DeleteWorkload", name, ns)

    def finish(self, name: str, *pods: tuple[str, str, str], ns: str = "default") -> list[Event]:
        """Report pods finished: (podGroup, pod, phase) each (lifecycle.md)."""
        return self.run("FinishPods", name, ns, {"pods": [{"podGroup": g, "name": p, "phase": ph}
                                                           for g, p, ph in pods]})

    def scale(self, name: str, body: dict, ns: str = "default") -> list[Event]:
        return self.run("ScaleWorkload", name, ns, body)

    def refused(self, kind: str, name: str, namespace: str | None = None, body: dict | None = None) -> Rejection:
        """The Rejection of a command the state refuses; nothing is recorded."""
        before = canonical(self.state)
        got = accept(self.state, kind, name, namespace, body)
        assert isinstance(got, Rejection), f"accepted: {got}"
        assert canonical(self.state) == before
        return got

    # -- reads ------------------------------------------------------------------------
    def wl(self, name: str, ns: str = "default") -> dict[str, Any]:
        return workload_view(self.state, self.state.workloads[(ns, name)])

    def group(self, wl: str, group: str | None = None, ns: str = "default") -> dict[str, Any]:
        groups = self.wl(wl, ns)["status"]["podGroups"]
        return groups[0] if group is None else next(g for g in groups if g["name"] == group)

    def placements(self, wl: str, group: str | None = None) -> dict[str, str | None]:
        return {p["name"]: p["node"] for p in self.group(wl, group)["pods"]}

    def node_view(self, name: str) -> dict[str, Any]:
        view = node_view(self.state, name)
        assert view is not None
        return view

    def types(self, events: list[Event] | None = None) -> list[str]:
        return [e.type for e in (self.last if events is None else events)]

    def replayed(self) -> ClusterState:
        state = ClusterState(self.state.cluster)
        for e in self.events:
            evolve(state, Event(e.position, e.type, json.loads(json.dumps(e.data))))
        return state

    def assert_replay_equal(self) -> None:
        from tests.domain.state_equality import assert_same_state

        replayed = self.replayed()
        assert canonical(replayed) == canonical(self.state)
        assert_same_state(self.state, replayed, live=True)  # every attribute, but caches and a pass's memos
