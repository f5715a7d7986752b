"""Issue 21, deliverable 1: a pod group inside a tree is placed exactly as model.md places it flat,
restricted to the rows the tree allows.

The property: a pod group alone inside a root CPG whose domain holds the whole cluster (a root on a
key every node carries with one value, or a root without topology) takes the same nodes and the same
domain as the same group submitted flat, over random clusters, usage and pod shapes (one or two
shapes, so that both the uniform shortcut and the simulation of each domain are exercised)."""
from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.domain.sim import Sim, basic, gang, pods

RACKS = ["r0", "r1", "r2", "r3"]


@st.composite
def clusters(draw: Any) -> list[tuple[str, str, int, int]]:
    n = draw(st.integers(2, 7))
    return [(f"n{i}", draw(st.sampled_from(RACKS)), draw(st.integers(1, 12)), draw(st.integers(1, 6)))
            for i in range(n)]


@st.composite
def groups(draw: Any) -> dict[str, Any]:
    entries = [pods(draw(st.integers(1, 4)), "a", cpu=str(draw(st.integers(1, 3))))]
    if draw(st.booleans()):
        entries.append(pods(draw(st.integers(1, 3)), "b", cpu=str(draw(st.integers(1, 2))),
                            memory=str(draw(st.integers(1, 2)))))
    total = sum(e["count"] for e in entries)
    topology = {"key": "rack"}
    if draw(st.booleans()):
        return gang("g", draw(st.integers(1, total)), *entries, topology=topology)
    return basic("g", *entries, topology=topology)


def _cluster(nodes: list[tuple[str, str, int, int]], fills: list[tuple[int, int]]) -> Sim:
    s = Sim()
    for name, rack, cpu, mem in nodes:
        s.node(name, labels={"rack": rack, "block": "b0"}, cpu=str(cpu), memory=str(mem))
    for i, (cpu, count) in enumerate(fills):  # usage before the probe, placed as it fits
        s.submit(f"fill{i}", basic("f", pods(count, cpu=str(cpu))))
    return s


def _placed(s: Sim, wl: str) -> tuple[dict[str, str | None], Any]:
    group = s.group(wl)
    return {p["name"]: p["node"] for p in group["pods"]}, group.get("domain")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3)), max_size=4), groups(),
       st.sampled_from(["block", None]))
def test_a_group_alone_in_a_whole_cluster_root_is_placed_as_flat(nodes, fills, group, root_key):
    flat = _cluster(nodes, fills)
    flat.submit("probe", group)
    tree = _cluster(nodes, fills)
    root: dict[str, Any] = {"name": "root", "podGroups": [group]}
    if root_key is not None:
        root["topology"] = {"key": root_key}
    tree.run("SubmitWorkload", "probe", "default", {"name": "probe", "compositePodGroups": [root]})
    assert _placed(tree, "probe") == _placed(flat, "probe")


def test_the_issue_example_takes_the_fuller_rack_in_a_tree_as_flat():
    """Rack a: 3 cpu free, none used; rack b: 5 free of 100 (95 used). A gang of 2 x 1 cpu on `rack`
    goes to rack b (domain score 97/100 against 2/3), flat and as the only child of a root on
    `block`, with one pod shape or two."""
    for entries in ([pods(2, cpu="1")], [pods(1, "a", cpu="1"), pods(1, "b", cpu="1", memory="1")]):
        for as_tree in (False, True):
            s = Sim()
            s.node("na", labels={"rack": "a", "block": "x"}, cpu="3", memory="10")
            s.node("nb", labels={"rack": "b", "block": "x"}, cpu="100", memory="10")
            s.submit("fill", basic("f", pods(1, cpu="95")))
            g = gang("g", 2, *entries, topology={"key": "rack"})
            if as_tree:
                s.run("SubmitWorkload", "w", "default", {"name": "w", "compositePodGroups": [
                    {"name": "root", "topology": {"key": "block"}, "podGroups": [g]}]})
            else:
                s.submit("w", g)
            assert set(s.placements("w").values()) == {"nb"}, (entries, as_tree)


def test_a_workload_claim_allocated_earlier_in_the_try_is_seen_by_every_candidate_domain():
    """Issue 21, deliverable 4. `first` is placed on n-b0 and allocates the workload's shared claim on
    n-b0's device; `second` (topology `rack`, same claim) must then reach that device: rack a (the
    higher domain score, with a device of its own on n-a1) is infeasible, so it goes to rack b, next to
    the claim's device, and the claim is allocated once."""
    from tests.domain.test_devices import device_class, gpus_node, template, with_claims

    s = Sim()
    device_class(s)
    s.node("n-a0", labels={"rack": "a", "host": "a0"}, cpu="4")
    gpus_node(s, "n-a1", [0], labels={"rack": "a", "host": "a1"}, cpu="4")
    gpus_node(s, "n-b0", [0], labels={"rack": "b", "host": "b0"}, cpu="16")
    s.submit("fill-a", basic("f", {**pods(1, cpu="4"), "nodeSelector": {"host": "a0"}}))
    s.submit("fill-b", basic("f", {**pods(1, cpu="4"), "nodeSelector": {"host": "b0"}}))
    entry = with_claims(pods(1, cpu="1"), ("fabric", "fabric"))
    root = {"name": "root", "schedulingPolicy": {"gang": {"minGroupCount": 2}},
            "podGroups": [basic("first", entry), gang("second", 1, entry, topology={"key": "rack"})]}
    s.run("SubmitWorkload", "t", "default", {
        "name": "t", "compositePodGroups": [root], "resourceClaimTemplates": [template("fabric")],
        "resourceClaims": [{"name": "fabric", "resourceClaimTemplateName": "fabric"}]})
    assert s.placements("t", "first") == {"p-0": "n-b0"}
    assert s.placements("t", "second") == {"p-0": "n-b0"}
    assert s.group("t", "second")["domain"] == "b"
    for group in ("first", "second"):  # one claim, of the workload, on n-b0's device
        claims = s.group("t", group)["claims"]
        assert [(c["sharing"], [(d["pool"], d["device"]) for d in c["devices"]]) for c in claims] == \
            [("Workload", [("n-b0", "gpu-0")])]
