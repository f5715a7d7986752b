"""Hypothesis strategies shared by the tests of tests/domain, and the runner that plays their
command streams into a Sim."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from tests.domain.sim import Sim

# -- scheduling streams (nodes, workloads, deletions, node removals) ------------------------------
NODE_NAMES = [f"n{i}" for i in range(6)]
RACKS = ["r1", "r2", "r3"]


@st.composite
def node_cmd(draw):
    return ("node", draw(st.sampled_from(NODE_NAMES)), {
        "labels": {"rack": draw(st.sampled_from(RACKS)), **({"pool": "a"} if draw(st.booleans()) else {})},
        "allocatable": {"cpu": str(draw(st.integers(1, 8))), "memory": f"{draw(st.integers(1, 16))}Gi",
                        **({"pods": draw(st.integers(1, 6))} if draw(st.booleans()) else {})},
        "unschedulable": draw(st.booleans()) and draw(st.booleans()),
    })


@st.composite
def workload_cmd(draw, idx):
    groups = []
    for gi in range(draw(st.integers(1, 2))):
        entries = []
        total = 0
        for ei in range(draw(st.integers(1, 2))):
            count = draw(st.integers(1, 4))
            total += count
            entry = {"name": f"e{ei}", "count": count,
                     "requests": {"cpu": draw(st.sampled_from(["500m", "1", "2", "3"])),
                                  "memory": draw(st.sampled_from(["512Mi", "1Gi", "4Gi"]))}}
            if draw(st.integers(0, 4)) == 0:
                entry["nodeSelector"] = {"pool": "a"}
            entries.append(entry)
        group = {"name": f"g{gi}", "pods": entries}
        if draw(st.booleans()):
            group["schedulingPolicy"] = {"gang": {"minCount": draw(st.integers(1, total))}}
        else:
            group["schedulingPolicy"] = {"basic": {}}
        if draw(st.integers(0, 3)) == 0:
            group["topology"] = {"key": "rack"}
        if draw(st.integers(0, 3)) == 0:
            group["disruptionMode"] = "All"
        groups.append(group)
    body = {"name": f"w{idx}", "podGroups": groups, "priority": draw(st.sampled_from([0, 5, 10, 100]))}
    if draw(st.integers(0, 5)) == 0:
        body["preemptionPolicy"] = "Never"
    return ("submit", f"w{idx}", body)


@st.composite
def streams(draw):
    cmds = [draw(node_cmd()) for _ in range(draw(st.integers(1, 4)))]
    submitted: list[int] = []
    for i in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["submit", "submit", "submit", "delete", "again", "node", "remove"]))
        if kind == "submit" or kind == "again" and not submitted:
            cmds.append(draw(workload_cmd(i)))
            submitted.append(i)
        elif kind == "again":  # a name deleted and submitted again: a new incarnation (lifecycle.md)
            again = draw(st.sampled_from(submitted))
            cmds += [("delete", f"w{again}", None), draw(workload_cmd(again))]
        elif kind == "delete":
            cmds.append(("delete", f"w{draw(st.integers(0, max(0, i - 1)))}", None))
        elif kind == "node":
            cmds.append(draw(node_cmd()))
        else:
            cmds.append(("remove", draw(st.sampled_from(NODE_NAMES)), None))
    return cmds


# -- preemption streams (low-priority fill, then higher-priority arrivals; devices maybe) ----------
NODES = [f"n{i}" for i in range(6)]
GPU = "gpu.example.com"


@st.composite
def preemption_node_cmd(draw, name: str | None = None) -> tuple[str, str, dict[str, Any]]:
    name = name or draw(st.sampled_from(NODES))
    labels = {"rack": draw(st.sampled_from(["r1", "r2"]))}
    if draw(st.booleans()):
        labels["pool"] = "a"
    return ("node", name, {"labels": labels, "allocatable": {
        "pods": draw(st.integers(1, 4)), "cpu": str(draw(st.integers(2, 8))), "memory": "16Gi"}})


@st.composite
def preemption_workload(draw, name: str, priority: int, devices: bool) -> tuple[str, str, dict[str, Any]]:
    groups = []
    uses_devices = False
    for gi in range(draw(st.integers(1, 2))):
        entries = []
        total = 0
        for ei in range(draw(st.integers(1, 2))):
            count = draw(st.integers(1, 3))
            total += count
            entry: dict[str, Any] = {"name": f"e{ei}", "count": count,
                                     "requests": {"cpu": draw(st.sampled_from(["1", "2"]))}}
            if draw(st.integers(0, 5)) == 0:
                entry["nodeSelector"] = {"pool": "a"}
            if devices and draw(st.integers(0, 3)) == 0:
                entry["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
                uses_devices = True
            entries.append(entry)
        group: dict[str, Any] = {"name": f"g{gi}", "pods": entries}
        if draw(st.booleans()):
            group["schedulingPolicy"] = {"gang": {"minCount": draw(st.integers(1, total))}}
        else:
            group["schedulingPolicy"] = {"basic": {}}
        if draw(st.integers(0, 3)) == 0:
            group["topology"] = {"key": "rack"}
        if draw(st.integers(0, 3)) == 0:
            group["disruptionMode"] = "All"
        groups.append(group)
    body: dict[str, Any] = {"name": name, "priority": priority, "podGroups": groups}
    if uses_devices:
        body["resourceClaimTemplates"] = [{"name": "one-gpu", "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 1}}]}}}]
    if draw(st.integers(0, 7)) == 0:
        body["preemptionPolicy"] = "Never"
    return ("submit", name, body)


@st.composite
def preemption_streams(draw) -> list[tuple[str, str, Any]]:
    """A few nodes filled with low-priority work, then mostly higher-priority arrivals."""
    devices = draw(st.booleans())
    cmds: list[tuple[str, str, Any]] = [draw(preemption_node_cmd(n)) for n in NODES[: draw(st.integers(1, 4))]]
    if devices:
        cmds.append(("class", "gpu", {"selectors": [{"cel": {"expression": f"device.driver == '{GPU}'"}}]}))
        for n in NODES[:2]:
            cmds.append(("slice", f"{n}-gpus", {"driver": GPU, "pool": {"name": n, "generation": 1}, "nodeName": n,
                                                "devices": [{"name": f"gpu-{i}"} for i in range(2)]}))
    i = 0
    for _ in range(draw(st.integers(2, 6))):  # the low-priority fill
        cmds.append(draw(preemption_workload(f"w{i}", draw(st.sampled_from([1, 2, 3])), devices)))
        i += 1
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["submit"] * 6 + ["delete", "again", "node", "remove"]))
        if kind == "submit":
            cmds.append(draw(preemption_workload(f"w{i}", draw(st.sampled_from([1, 2, 3, 5, 10, 20])), devices)))
            i += 1
        elif kind == "again":  # a name deleted and submitted again: a new incarnation of it
            again = draw(st.integers(0, i - 1))
            cmds += [("delete", f"w{again}", None),
                     draw(preemption_workload(f"w{again}", draw(st.sampled_from([1, 2, 5, 20])), devices))]
        elif kind == "delete":
            cmds.append(("delete", f"w{draw(st.integers(0, i - 1))}", None))
        elif kind == "node":
            cmds.append(draw(preemption_node_cmd()))
        else:
            cmds.append(("remove", draw(st.sampled_from(NODES)), None))
    return cmds


def run(cmds: list[tuple[str, str, Any]], check: Callable[[Sim], None] | None = None) -> Sim:
    """Play a stream of (kind, name, body) into a fresh Sim; `check(sim)` after each command.
    A submission of a name that lives, a deletion of a workload not live and a removal of a node
    not alive are skipped (a deleted workload's name makes a new incarnation: lifecycle.md)."""
    s = Sim()
    for kind, name, body in cmds:
        state = s.state
        if kind == "node":
            s.run("UpsertNode", name, body=body)
        elif kind == "class":
            s.run("UpsertDeviceClass", name, body=body)
        elif kind == "slice":
            s.run("UpsertResourceSlice", name, body=body)
        elif kind == "submit":
            live = state.workloads.get(("default", name))
            if live is None or live.deleted_at is not None:
                s.run("SubmitWorkload", name, "default", body)
        elif kind == "delete":
            wl = state.workloads.get(("default", name))
            if wl is not None and wl.deleted_at is None:
                s.run("DeleteWorkload", name, "default")
        elif kind == "finish":
            _finish_some(s, name, body)
        elif kind == "scale":
            _scale_some(s, name, body)
        elif kind == "remove":
            row = state.nodes.index.get(name)
            if row is not None and state.nodes.alive[row]:
                s.run("RemoveNode", name)
        if check is not None:
            check(s)
    return s


def _finish_some(s: Sim, name: str, body: tuple[int, int, str]) -> None:
    """Report `how_many` Running pods of workload `name` finished in `phase`, from the `pick`-th
    Running pod on (in view order); nothing when it runs none."""
    pick, how_many, phase = body
    wl = s.state.workloads.get(("default", name))
    if wl is None or wl.deleted_at is not None:
        return
    running = [(g.spec.name, g.spec.pod_names[p]) for g in wl.groups for p, n in enumerate(g.node_of) if n >= 0]
    if not running:
        return
    chosen = [running[(pick + k) % len(running)] for k in range(min(how_many, len(running)))]
    s.finish(name, *[(g, p, phase) for g, p in chosen])


# what the scale commands of the streams did (tests assert they exercised each outcome)
SCALES: dict[str, int] = {}


def _scale_some(s: Sim, name: str, body: tuple[int, int, int, int | None, bool]) -> None:
    """Set one pod entry of one group of workload `name` to `count` pods (and the gang's minCount to
    the `min_pick`-th value, at most the current one unless `may_raise`); a change the state
    refuses is counted and skipped."""
    from service.domain import Rejection, accept

    gpick, epick, count, min_pick, may_raise = body
    wl = s.state.workloads.get(("default", name))
    if wl is None or wl.deleted_at is not None or wl.composites:
        return
    g = wl.groups[gpick % len(wl.groups)]
    entries = wl.body["podGroups"][g.index]["pods"]
    entry = entries[epick % len(entries)]
    group: dict[str, Any] = {"name": g.spec.name, "pods": [{"name": entry["name"], "count": count}]}
    if g.spec.gang and min_pick is not None:
        total = g.total - int(entry.get("count", 1)) + count
        min_count = 1 + min_pick % total
        group["schedulingPolicy"] = {"gang": {"minCount": min_count if may_raise else min(min_count, g.spec.min_count)}}
    got = accept(s.state, "ScaleWorkload", name, "default", {"podGroups": [group]})
    if isinstance(got, Rejection):
        SCALES[got.reason] = SCALES.get(got.reason, 0) + 1
        return
    removed = any(r["removedPods"] for r in got[1]["podGroups"])
    added = any(r["addedPods"] for r in got[1]["podGroups"])
    SCALES["shrunk" if removed else "grown" if added else "other"] = SCALES.get(
        "shrunk" if removed else "grown" if added else "other", 0) + 1
    s.scale(name, {"podGroups": [group]})


@st.composite
def lifecycle_streams(draw, phases: tuple[str, ...] = ("Succeeded", "Failed"),
                      scales: bool = True) -> list[tuple[str, str, Any]]:
    """Preemption streams with finished pods reported among the arrivals, deletions and node loss,
    and sizes changed (`scales`: pod entries grown or shrunk, minCount lowered, and raised when a
    pod may fail)."""
    cmds = draw(preemption_streams())
    out: list[tuple[str, str, Any]] = []
    names = [name for kind, name, _ in cmds if kind == "submit"]
    for cmd in cmds:
        out.append(cmd)
        if cmd[0] in ("submit", "delete", "remove") and names and draw(st.booleans()):
            out.append(("finish", draw(st.sampled_from(names)),
                        (draw(st.integers(0, 30)), draw(st.integers(1, 3)), draw(st.sampled_from(phases)))))
        if scales and cmd[0] in ("submit", "delete", "remove") and names and draw(st.booleans()):
            out.append(("scale", draw(st.sampled_from(names)),
                        (draw(st.integers(0, 3)), draw(st.integers(0, 3)), draw(st.integers(1, 5)),
                         draw(st.one_of(st.none(), st.integers(0, 9))), "Failed" in phases)))
    return out
