"""DRA device allocation (model.md *Devices*): claims, sharing, constraints, losses, preemption."""
from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.domain.model import events as ev
from service.domain.model.reasons import render_explanation
from tests.domain.sim import Sim, basic, gang, pods

GPU = "gpu.example.com"


def device_class(s: Sim, name: str = "gpu", driver: str = GPU) -> None:
    s.run("UpsertDeviceClass", name, body={"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]})


def gpu(name: str, domain: int | None = None, model: str = "H100") -> dict[str, Any]:
    attrs: dict[str, Any] = {"model": {"string": model}}
    if domain is not None:
        attrs["nvlinkDomain"] = {"int": domain}
    return {"name": name, "attributes": attrs, "capacity": {"memory": {"value": "80Gi"}}}


def node_slice(s: Sim, node: str, devices: list[dict[str, Any]], name: str | None = None,
               driver: str = GPU) -> list[ev.Event]:
    return s.run("UpsertResourceSlice", name or f"{node}-gpus",
                 body={"driver": driver, "pool": {"name": node, "generation": 1}, "nodeName": node,
                       "devices": devices})


def gpus_node(s: Sim, node: str, domains: list[int], labels: dict | None = None, **alloc: Any) -> None:
    s.node(node, labels=labels, cpu=alloc.pop("cpu", "64"), **alloc)
    node_slice(s, node, [gpu(f"gpu-{i}", d) for i, d in enumerate(domains)])


def template(name: str, count: int | None = 1, *, match: bool = False, cls: str = "gpu",
             selectors: tuple[str, ...] = (), all_mode: bool = False, request: str = "gpu") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    if all_mode:
        exactly["allocationMode"] = "All"
    elif count is not None:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    devices: dict[str, Any] = {"requests": [{"name": request, "exactly": exactly}]}
    if match:
        devices["constraints"] = [{"matchAttribute": f"{GPU}/nvlinkDomain"}]
    return {"name": name, "spec": {"devices": devices}}


def claims(*entries: tuple[str, str]) -> list[dict[str, str]]:
    return [{"name": n, "resourceClaimTemplateName": t} for n, t in entries]


def with_claims(entry: dict[str, Any], *refs: tuple[str, str]) -> dict[str, Any]:
    return {**entry, "resourceClaims": claims(*refs)}


def submit_claiming(s: Sim, name: str, tpl: dict[str, Any], count: int = 1, group=basic, **extra: Any):
    entry = with_claims(pods(count), ("gpus", tpl["name"]))
    grp = group("g", *((count, entry) if group is gang else (entry,)))
    return s.submit(name, grp, resourceClaimTemplates=[tpl], **extra)


def devices_of(s: Sim, wl: str, group: str | None = None) -> list[list[str]]:
    return [[d["device"] for d in c["devices"]] for c in s.group(wl, group)["claims"]]


def all_claimed(s: Sim) -> list[tuple[str, str, str]]:
    out = []
    for w in s.state.workloads.values():
        if w.deleted_at is not None:
            continue
        for g in s.state.group(w.spec.namespace, w.spec.name, "g").workload.groups:
            for c in s.group(w.spec.name, g.spec.name)["claims"]:
                out.extend((d["driver"], d["pool"], d["device"]) for d in c["devices"])
    return out


# -- allocation ---------------------------------------------------------------------------------
def test_match_attribute_fills_nvlink_domains_in_order_and_a_third_waits():
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 1, 0, 1])  # interleaved: a constraint-free pick would mix domains
    two = template("two", 2, match=True)
    submit_claiming(s, "a", two)
    submit_claiming(s, "b", two)
    assert devices_of(s, "a") == [["gpu-0", "gpu-2"]]  # domain 0 first
    assert devices_of(s, "b") == [["gpu-1", "gpu-3"]]
    data = s.last[0].data
    assert s.last[0].type == ev.POD_GROUP_SCHEDULED
    assert data["claims"] == [{"name": "gpus", "sharing": "Pod", "pod": "p-0",
                               "devices": [{"driver": GPU, "pool": "n1", "device": "gpu-1"},
                                           {"driver": GPU, "pool": "n1", "device": "gpu-3"}],
                               "reservedFor": [{"kind": "Pod", "name": "p-0"}]}]
    submit_claiming(s, "c", two)
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]
    expl = s.last[0].data["explanation"]
    assert render_explanation(expl)["message"] == "0/1 nodes are available: 1 cannot allocate all claims."
    assert expl["devices"] == {"claims": [{
        "claim": "gpus", "sharing": "Pod", "pod": "p-0", "request": "gpu", "deviceClassName": "gpu",
        "needed": 2, "reason": "InsufficientDevices", "nodes": 1, "available": 0, "reachable": 4}]}
    assert s.group("c")["explanation"]["devices"]["claims"][0]["reason"] == "InsufficientDevices"
    s.assert_replay_equal()


def test_devices_from_different_domains_never_satisfy_one_claim():
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 0, 1, 2])
    two = template("two", 2, match=True)
    submit_claiming(s, "a", two)
    assert devices_of(s, "a") == [["gpu-0", "gpu-1"]]
    submit_claiming(s, "b", two)  # gpu-2 (domain 1) and gpu-3 (domain 2) are free, but apart
    assert s.group("b")["placedPods"] == 0
    detail = s.last[0].data["explanation"]["devices"]["claims"]
    assert detail == [{"claim": "gpus", "sharing": "Pod", "pod": "p-0", "reason": "ConstraintNotSatisfied",
                       "constraints": [{"matchAttribute": f"{GPU}/nvlinkDomain", "requests": ["gpu"]}],
                       "nodes": 1}]
    # without the constraint the same two devices do
    submit_claiming(s, "c", template("two-any", 2))
    assert devices_of(s, "c") == [["gpu-2", "gpu-3"]]
    s.assert_replay_equal()


def test_cel_selector_on_a_string_attribute():
    s = Sim()
    device_class(s)
    s.node("n1", cpu="8")
    node_slice(s, "n1", [gpu("gpu-0", model="H100"), gpu("gpu-1", model="A100"), gpu("gpu-2", model="A100")])
    a100 = template("a100", 2, selectors=(f'device.attributes["{GPU}"].model == "A100"',))
    submit_claiming(s, "a", a100)
    assert devices_of(s, "a") == [["gpu-1", "gpu-2"]]
    # capacity is an integer in base units; a missing attribute is an error, so no match
    big = template("big", 1, selectors=(f'device.capacity["{GPU}"].memory >= 80 * 1024 * 1024 * 1024',))
    submit_claiming(s, "b", big)
    assert devices_of(s, "b") == [["gpu-0"]]
    missing = template("odd", 1, selectors=(f'device.attributes["{GPU}"].nope == 1',))
    submit_claiming(s, "c", missing)
    assert s.group("c")["placedPods"] == 0
    s.assert_replay_equal()


def test_group_shared_network_device_allocated_once_for_pods_in_its_rack():
    s = Sim()
    device_class(s, "nic", driver="net.example.com")
    s.node("a0", labels={"rack": "r0"}, cpu="4")  # smallest name, but cannot reach the fabric
    s.node("n1", labels={"rack": "r1"}, cpu="4")
    s.node("n2", labels={"rack": "r1"}, cpu="4")
    s.run("UpsertResourceSlice", "fabric-r1", body={
        "driver": "net.example.com", "pool": {"name": "r1"}, "nodeSelector": {"rack": "r1"},
        "devices": [{"name": "nic-0"}, {"name": "nic-1"}]})
    fabric = template("fabric", 1, cls="nic", request="nic")
    group = gang("g", 2, with_claims(pods(2, cpu="3"), ("fabric", "fabric")),
                 resourceClaims=claims(("fabric", "fabric")))
    s.submit("w", group, resourceClaimTemplates=[fabric])
    data = s.last[0].data
    assert s.placements("w") == {"p-0": "n1", "p-1": "n2"}
    assert data["claims"] == [{"name": "fabric", "sharing": "PodGroup", "pod": None,
                               "devices": [{"driver": "net.example.com", "pool": "r1", "device": "nic-0"}],
                               "reservedFor": [{"kind": "PodGroup", "name": "g"}]}]
    assert s.group("w")["claims"] == data["claims"]
    s.assert_replay_equal()


def test_group_claim_pins_later_consumers_to_the_nodes_that_reach_it():
    s = Sim()
    device_class(s)
    s.node("n1", cpu="2")
    s.node("n2", cpu="2")
    node_slice(s, "n1", [gpu("gpu-0")])
    one = template("one", 1)
    group = basic("g", with_claims(pods(2, cpu="2"), ("shared", "one")), resourceClaims=claims(("shared", "one")))
    s.submit("w", group, resourceClaimTemplates=[one])
    # p-0 takes n1 and the claim; p-1 would fit n2 by cpu but n2 does not reach gpu-0
    assert s.placements("w") == {"p-0": "n1", "p-1": None}
    detail = s.group("w")["explanation"]["devices"]["claims"]
    assert detail == [{"claim": "shared", "sharing": "PodGroup", "pod": None,
                       "reason": "AllocatedDevicesNotReachable", "nodes": 1}]
    s.assert_replay_equal()


def test_workload_claim_and_unreferenced_group_claim():
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 0, 0, 0])
    one = template("one", 1)
    w = {"resourceClaims": claims(("wide", "one")), "resourceClaimTemplates": [one]}
    s.submit("w",
             basic("a", with_claims(pods(1, cpu="1"), ("wide", "one"))),
             basic("b", with_claims(pods(1, cpu="1"), ("wide", "one")), resourceClaims=claims(("spare", "one"))),
             **w)
    a, b = s.group("w", "a")["claims"], s.group("w", "b")["claims"]
    wide = {"name": "wide", "sharing": "Workload", "pod": None,
            "devices": [{"driver": GPU, "pool": "n1", "device": "gpu-0"}],
            "reservedFor": [{"kind": "Workload", "name": "w"}]}
    assert a == [wide]
    assert b == [{"name": "spare", "sharing": "PodGroup", "pod": None,
                  "devices": [{"driver": GPU, "pool": "n1", "device": "gpu-1"}],
                  "reservedFor": [{"kind": "PodGroup", "name": "b"}]}, wide]
    s.delete("w")
    assert s.state.dra.claims == {}
    s.assert_replay_equal()


def test_per_pod_four_gpu_claims_put_gang_pods_on_different_nodes():
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 0, 0, 0])
    gpus_node(s, "n2", [0, 0, 0, 0])
    submit_claiming(s, "w", template("four", 4), count=2, group=gang)
    assert s.placements("w") == {"p-0": "n1", "p-1": "n2"}
    cl = s.group("w")["claims"]
    assert [(c["pod"], c["reservedFor"]) for c in cl] == [("p-0", [{"kind": "Pod", "name": "p-0"}]),
                                                         ("p-1", [{"kind": "Pod", "name": "p-1"}])]
    assert {d["pool"] for d in cl[1]["devices"]} == {"n2"}
    # a third node-sized gang does not fit anywhere and places nothing
    submit_claiming(s, "x", template("four", 4), count=2, group=gang)
    assert s.group("x")["placedPods"] == 0
    s.assert_replay_equal()


def test_all_mode_takes_every_matching_device():
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 1, 0, 1])
    every = template("every", None, all_mode=True)
    submit_claiming(s, "a", every)
    assert devices_of(s, "a") == [["gpu-0", "gpu-1", "gpu-2", "gpu-3"]]
    submit_claiming(s, "b", every)
    assert s.group("b")["placedPods"] == 0
    # All with matchAttribute fails when the devices span domains
    s2 = Sim()
    device_class(s2)
    gpus_node(s2, "n1", [0, 1])
    all_match = template("all-match", None, all_mode=True, match=True)
    submit_claiming(s2, "a", all_match)
    assert s2.group("a")["placedPods"] == 0
    s.assert_replay_equal()
    s2.assert_replay_equal()


def test_deleting_a_workload_lets_a_waiting_one_take_its_devices():
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 0])
    two = template("two", 2)
    submit_claiming(s, "a", two)
    submit_claiming(s, "b", two)
    assert s.group("b")["placedPods"] == 0
    s.delete("a")
    assert s.types() == [ev.POD_GROUP_SCHEDULED]
    assert devices_of(s, "b") == [["gpu-0", "gpu-1"]]
    assert s.wl("a")["status"]["podGroups"][0]["claims"] == []
    s.assert_replay_equal()


def test_preemptor_that_needs_a_victims_devices_gets_them():
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 0, 0, 0])  # plenty of cpu: only the devices are short
    four = template("four", 4)
    submit_claiming(s, "low", four, priority=1)
    submit_claiming(s, "mid", template("none", 1, selectors=("false",)), priority=1)  # never fits, no devices
    submit_claiming(s, "high", four, priority=10)
    types = s.types()
    assert ev.POD_GROUP_PREEMPTED in types and ev.POD_GROUP_SCHEDULED in types
    pre = next(e.data for e in s.last if e.type == ev.POD_GROUP_PREEMPTED)
    assert pre["workload"] == "low"
    assert pre["claimsReleased"] == [{"name": "gpus", "sharing": "Pod", "pod": "p-0"}]
    assert devices_of(s, "high") == [["gpu-0", "gpu-1", "gpu-2", "gpu-3"]]
    assert s.group("low")["placedPods"] == 0 and s.group("low")["claims"] == []
    s.assert_replay_equal()


def test_preemption_keeps_a_victim_whose_devices_the_preemptor_does_not_need():
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 0])
    gpus_node(s, "n2", [0, 0])
    two = template("two", 2)
    submit_claiming(s, "low-a", two, priority=1)
    submit_claiming(s, "low-b", two, priority=1)
    submit_claiming(s, "high", two, priority=10)
    victims = [e.data["workload"] for e in s.last if e.type == ev.POD_GROUP_PREEMPTED]
    assert len(victims) == 1
    assert sum(s.group(w)["placedPods"] for w in ("low-a", "low-b")) == 1
    assert sorted(all_claimed(s)) == sorted(set(all_claimed(s)))
    s.assert_replay_equal()


def test_preemption_would_not_help_when_devices_are_missing():
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 0])
    submit_claiming(s, "low", template("two", 2), priority=1)
    submit_claiming(s, "high", template("three", 3), priority=10)
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]
    assert s.last[0].data["explanation"]["preemption"] == "PreemptionWouldNotHelp"
    assert s.group("low")["placedPods"] == 1
    s.assert_replay_equal()


# -- losses ---------------------------------------------------------------------------------------
def test_removing_a_slice_releases_its_pods():
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 0, 0, 0])
    gpus_node(s, "n2", [0, 0, 0, 0])
    submit_claiming(s, "w", template("four", 4), count=2, group=gang)
    assert s.placements("w") == {"p-0": "n1", "p-1": "n2"}
    s.run("RemoveResourceSlice", "n2-gpus")
    assert s.types()[0] == ev.PODS_LOST
    lost = s.last[0].data
    assert lost["reason"] == "DevicesRemoved" and lost["wholeGroup"] is True  # gang below minCount
    assert [p["pod"] for p in lost["pods"]] == ["p-0", "p-1"]
    assert lost["claimsReleased"] == [{"name": "gpus", "sharing": "Pod", "pod": "p-1"},
                                      {"name": "gpus", "sharing": "Pod", "pod": "p-0"}]
    assert s.group("w")["placedPods"] == 0 and s.group("w")["claims"] == []
    node_slice(s, "n2", [gpu(f"gpu-{i}", 0) for i in range(4)])  # back: the gang is placed again
    assert s.group("w")["placedPods"] == 2
    s.assert_replay_equal()


def test_slice_replaced_without_a_device_loses_only_that_devices_claims():
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 0, 0, 0])
    one = template("one", 1)
    submit_claiming(s, "w", one, count=4)
    assert devices_of(s, "w") == [["gpu-0"], ["gpu-1"], ["gpu-2"], ["gpu-3"]]
    node_slice(s, "n1", [gpu("gpu-0", 0), gpu("gpu-1", 0), gpu("gpu-3", 0)])  # gpu-2 gone
    lost = [e.data for e in s.last if e.type == ev.PODS_LOST]
    assert len(lost) == 1 and [p["pod"] for p in lost[0]["pods"]] == ["p-2"]
    assert lost[0]["wholeGroup"] is False
    assert s.group("w")["placedPods"] == 3
    s.assert_replay_equal()


def test_node_removal_frees_claims_of_its_pods():
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 0])
    gpus_node(s, "n2", [0, 0])
    submit_claiming(s, "w", template("two", 2), count=2)
    s.remove_node("n1")
    lost = next(e.data for e in s.last if e.type == ev.PODS_LOST)
    assert lost["reason"] == "NodeRemoved"
    assert lost["claimsReleased"] == [{"name": "gpus", "sharing": "Pod", "pod": "p-0"}]
    assert [c["pod"] for c in s.group("w")["claims"]] == ["p-1"]
    s.assert_replay_equal()


def test_group_claim_on_a_removed_node_is_deallocated_with_its_consumers():
    s = Sim()
    device_class(s)
    s.node("n1", cpu="1")
    s.node("n2", cpu="1")
    node_slice(s, "n1", [gpu("gpu-0")])
    s.run("UpsertResourceSlice", "shared", body={"driver": GPU, "pool": {"name": "all"}, "allNodes": True,
                                                 "devices": [gpu("gpu-9")]})
    one = template("one", 1, selectors=(f'device.attributes["{GPU}"].model == "H100"',))
    group = basic("g", with_claims(pods(1, name="user", cpu="1"), ("local", "one")),
                  pods(1, name="other", cpu="1"), resourceClaims=claims(("local", "one")))
    s.submit("w", group, resourceClaimTemplates=[one])
    assert s.placements("w") == {"user-0": "n1", "other-0": "n2"}
    s.remove_node("n1")
    lost = next(e.data for e in s.last if e.type == ev.PODS_LOST)
    assert lost["claimsReleased"] == [{"name": "local", "sharing": "PodGroup", "pod": None}]
    s.node("n3", cpu="1")
    s.run("UpsertResourceSlice", "n3-gpus", body={"driver": GPU, "pool": {"name": "n3"}, "nodeName": "n3",
                                                  "devices": [gpu("gpu-0")]})
    assert s.placements("w")["user-0"] in ("n3",)
    s.assert_replay_equal()


# -- the property -----------------------------------------------------------------------------------
@st.composite
def scenario(draw):
    nodes = draw(st.integers(1, 3))
    steps = []
    for i in range(nodes):
        devs = draw(st.lists(st.integers(0, 2), min_size=0, max_size=4))
        steps.append(("node", f"n{i}", devs, draw(st.sampled_from(["r1", "r2"]))))
    steps.append(("rackslice", draw(st.integers(0, 2))))
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["submit", "submit", "submit", "delete", "slice", "unslice", "rmnode"]))
        if kind == "submit":
            steps.append(("submit", draw(st.integers(1, 3)), draw(st.booleans()), draw(st.integers(1, 2)),
                          draw(st.sampled_from(["pod", "group", "workload", "all", "nic"])),
                          draw(st.integers(0, 3)), draw(st.booleans())))
        elif kind == "slice":
            steps.append(("slice", draw(st.integers(0, nodes - 1)),
                          draw(st.lists(st.integers(0, 2), min_size=0, max_size=4))))
        else:
            steps.append((kind, draw(st.integers(0, 5))))
    return steps


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_property_no_device_in_two_live_claims_and_replay_equals_live(steps):
    s = Sim()
    device_class(s)
    device_class(s, "nic", driver="net.example.com")
    submitted: list[str] = []
    for step in steps:
        kind = step[0]
        if kind == "node":
            _, name, domains, rack = step
            s.node(name, labels={"rack": rack}, cpu="4")
            node_slice(s, name, [gpu(f"gpu-{i}", d) for i, d in enumerate(domains)])
        elif kind == "rackslice":
            s.run("UpsertResourceSlice", "fabric", body={
                "driver": "net.example.com", "pool": {"name": "fabric"}, "nodeSelector": {"rack": "r1"},
                "devices": [{"name": f"nic-{i}"} for i in range(step[1])]})
        elif kind == "submit":
            _, count, is_gang, need, sharing, prio, match = step
            name = f"w{len(submitted)}"
            tpl = (template("t", None, all_mode=True) if sharing == "all"
                   else template("t", 1, cls="nic", request="nic") if sharing == "nic"
                   else template("t", need, match=match))
            entry = with_claims(pods(count, cpu="1"), ("c", "t"))
            extra: dict[str, Any] = {"resourceClaimTemplates": [tpl], "priority": prio}
            group_extra: dict[str, Any] = {}
            if sharing in ("group", "nic"):
                group_extra["resourceClaims"] = claims(("c", "t"))
            elif sharing == "workload":
                extra["resourceClaims"] = claims(("c", "t"))
            grp = gang("g", count, entry, **group_extra) if is_gang else basic("g", entry, **group_extra)
            s.submit(name, grp, **extra)
            submitted.append(name)
        elif kind == "delete":
            live = [w for w in submitted if s.state.workloads[("default", w)].deleted_at is None]
            if live:
                s.delete(live[step[1] % len(live)])
        elif kind == "slice":
            _, idx, domains = step
            if f"n{idx}" in s.state.nodes.index:
                node_slice(s, f"n{idx}", [gpu(f"gpu-{i}", d) for i, d in enumerate(domains)])
        elif kind == "unslice":
            names = sorted(s.state.resource_slices)
            if names:
                s.run("RemoveResourceSlice", names[step[1] % len(names)])
        elif kind == "rmnode":
            alive = [n for n in sorted(s.state.nodes.index) if s.state.nodes.alive[s.state.nodes.index[n]]]
            if len(alive) > 1:
                s.remove_node(alive[step[1] % len(alive)])
        dra = s.state.dra
        owners: dict[int, tuple] = {}
        for key, alloc in dra.claims.items():
            for d in alloc.device_ids:
                assert d not in owners, f"device {dra.devices[d].ident} in {owners[d]} and {key}"
                owners[d] = key
                assert dra.devices[d].alive
        assert sorted(owners) == [int(d) for d in dra.busy.nonzero()[0]]
        for w in submitted:
            wl = s.state.workloads[("default", w)]
            for g in wl.groups:
                for use_pod, node in enumerate(g.node_of):
                    if node < 0:
                        assert not any(k[0] == "Pod" and k[1] == wl.position and k[3] == use_pod
                                       for k in dra.claims)
    s.assert_replay_equal()


def test_missing_class_is_explained_and_a_later_class_lets_the_pod_in():
    s = Sim()
    gpus_node(s, "n1", [0, 0])
    submit_claiming(s, "a", template("one", 1))
    detail = s.last[0].data["explanation"]["devices"]["claims"]
    assert [d["reason"] for d in detail] == ["DeviceClassNotFound"]
    device_class(s)  # adds room: the pass sweeps the pending group
    assert devices_of(s, "a") == [["gpu-0"]]
    s.assert_replay_equal()


def test_unreferenced_group_claim_is_reallocated_after_its_device_is_lost():
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 0])
    group = basic("g", pods(2, cpu="1"), resourceClaims=claims(("spare", "one")))
    s.submit("w", group, resourceClaimTemplates=[template("one", 1)])
    assert devices_of(s, "w") == [["gpu-0"]]
    node_slice(s, "n1", [gpu("gpu-1", 0)])  # gpu-0 gone: the claim is dropped, no pod consumed it
    assert not [e for e in s.last if e.type == ev.PODS_LOST]
    assert s.group("w")["claims"] == [] and s.group("w")["placedPods"] == 2
    s.assert_replay_equal()


def test_decide_is_pure_and_replay_is_byte_identical():
    import copy
    import json

    from service.domain import decide
    s = Sim()
    device_class(s)
    gpus_node(s, "n1", [0, 1, 0, 1])
    submit_claiming(s, "a", template("two", 2, match=True))
    before = copy.deepcopy(s.state)
    inp = ev.Event(s.state.position + 1, ev.WORKLOAD_SUBMITTED, {
        "namespace": "default", "name": "b", "priority": 0, "preemptionPolicy": "PreemptLowerPriority",
        "spec": {"name": "b", "podGroups": [basic("g", with_claims(pods(1), ("gpus", "two")))],
                 "resourceClaimTemplates": [template("two", 2, match=True)]}})
    first = decide(s.state, inp)
    second = decide(s.state, inp)
    dump = lambda es: json.dumps([(e.type, e.data) for e in es], sort_keys=True)  # noqa: E731
    assert dump(first) == dump(second)
    assert first[0].data["claims"][0]["devices"][0]["device"] == "gpu-1"
    from service.domain.read.views import canonical
    assert canonical(before) == canonical(s.state)


# -- the queue's class index with device claims ---------------------------------------------------
def test_waiting_claim_groups_share_a_class_and_place_when_their_devices_come_back():
    s = Sim()
    device_class(s)
    gpus_node(s, "a", [0, 0])
    tpl = template("two", 2)
    submit_claiming(s, "holder", tpl)
    submit_claiming(s, "w1", tpl)
    submit_claiming(s, "w2", tpl)
    g1 = s.state.group("default", "w1", "g")
    g2 = s.state.group("default", "w2", "g")
    assert g1.class_key is not None and g1.class_key == g2.class_key  # equal templates: one class
    assert s.group("w1")["phase"] == "Pending" and s.group("w2")["phase"] == "Pending"
    # a deletion elsewhere frees nothing these need: they stay pending, tried or skipped
    s.node("b", cpu="64")
    s.delete("holder")  # its two GPUs come back: the first waiting group takes them
    assert s.group("w1")["phase"] == "Scheduled"
    assert s.group("w2")["phase"] == "Pending"
    node_slice(s, "b", [gpu("gpu-0"), gpu("gpu-1")])  # new devices: the other one places
    assert s.group("w2")["phase"] == "Scheduled"
    s.assert_replay_equal()


def test_a_network_device_freed_by_a_pod_on_one_node_serves_a_waiting_pod_on_another():
    s = Sim()
    device_class(s, "nic", driver="nic.example.com")
    s.node("a", cpu="1")
    s.node("b", labels={"only": "b"}, cpu="1")
    s.run("UpsertResourceSlice", "fabric", body={
        "driver": "nic.example.com", "pool": {"name": "fabric", "generation": 1}, "allNodes": True,
        "devices": [{"name": "nic-0"}]})
    tpl = template("nic", 1, cls="nic")
    s.submit("first", basic("g", with_claims({**pods(1, cpu="1"), "nodeSelector": {}}, ("gpus", "nic"))),
             resourceClaimTemplates=[tpl])
    assert s.placements("first") == {"p-0": "a"}
    waiting = with_claims({**pods(1, cpu="1"), "nodeSelector": {"only": "b"}}, ("gpus", "nic"))
    s.submit("second", basic("g", waiting), resourceClaimTemplates=[tpl])
    s.submit("third", basic("g", waiting), resourceClaimTemplates=[tpl])  # same class, behind it
    assert s.group("second")["phase"] == "Pending"  # b has cpu, but the one nic is taken
    # deleting `first` touches only node a, but the nic it frees is reached from b too
    s.delete("first")
    assert s.placements("second") == {"p-0": "b"}
    assert s.group("third")["phase"] == "Pending"
    s.assert_replay_equal()


def test_pods_requesting_only_devices_are_placed_again_when_devices_are_freed():
    """Pods that request no resource fit any number of times by capacity (nodes here do not declare
    `pods`): the queue's bounds must not overflow summing those counts over the freed rows."""
    s = Sim()
    device_class(s)
    for n in ("a", "b"):
        s.node(n, cpu="1")  # `pods` not declared: unlimited
        node_slice(s, n, [gpu("gpu-0"), gpu("gpu-1")])
    tpl = template("both", 2)
    first = with_claims({"name": "p", "count": 2}, ("gpus", "both"))
    s.submit("first", gang("g", 2, first), resourceClaimTemplates=[tpl])
    s.submit("second", gang("g", 2, first), resourceClaimTemplates=[tpl])
    assert s.group("first")["phase"] == "Scheduled"
    assert s.group("second")["phase"] == "Pending"
    s.delete("first")  # frees the GPUs of both nodes: two dirty rows
    assert s.group("second")["phase"] == "Scheduled"
    s.assert_replay_equal()


class _Dev:
    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs = attrs

    def attr(self, qualified: str) -> Any:
        return self.attrs.get(qualified)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.tuples(st.sampled_from([1, 2]), st.integers(0, 3))), max_size=12),
       free_mask=st.lists(st.booleans(), min_size=12, max_size=12), count=st.integers(1, 5))
def test_one_constrained_request_takes_what_the_general_search_takes(values, free_mask, count):
    """The fast path for one ExactCount request under one matchAttribute equals the general search."""
    from service.domain.dra.claims import Request, Template
    from service.domain.dra.search import constrained, one_constrained

    attr = f"{GPU}/nvlinkDomain"
    devs = [_Dev({} if v is None else {attr: v}) for v in values]
    full = tuple(range(len(devs)))
    free = [d for d in full if free_mask[d]]
    t = Template((Request("gpu", "gpu", False, count, ()),), ((attr, (0,)),))
    assert one_constrained(count, attr, free, devs) == constrained(t, [full], [free], devs)
