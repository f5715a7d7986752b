"""GPU sharing through consumable capacity (sharing.md): policies, consumption, allocation,
shareIDs, views, freeing, preemption, and its properties."""
from __future__ import annotations

import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.domain.dra import capacity
from service.domain.model import events as ev
from service.domain.read.views import object_views
from tests.domain.sim import Sim, basic, gang, pods
from tests.domain.test_devices import GPU, device_class, with_claims


def sgpu(name: str, milli: str = "1000", *, policy: dict[str, Any] | None = None, memory: str | None = None,
         memory_policy: bool = True, model: str = "T4", shareable: bool = True, index: int = 0) -> dict[str, Any]:
    cap: dict[str, Any] = {"milli": {"value": milli}}
    if policy is not None:
        cap["milli"]["requestPolicy"] = policy
    if memory is not None:
        cap["memory"] = {"value": memory}
        if memory_policy:
            cap["memory"]["requestPolicy"] = {"default": "0", "validRange": {"min": "0"}}
    d: dict[str, Any] = {"name": name, "attributes": {"model": {"string": model}, "index": {"int": index}},
                         "capacity": cap}
    if shareable:
        d["allowMultipleAllocations"] = True
    return d


def gpu_node(s: Sim, node: str, devices: list[dict[str, Any]], cpu: str = "64") -> None:
    s.node(node, cpu=cpu)
    s.run("UpsertResourceSlice", f"{node}-gpus", body={
        "driver": GPU, "pool": {"name": node, "generation": 1}, "nodeName": node, "devices": devices})


def share_tpl(name: str, milli: str | None, count: int = 1, **extra: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "count": count, **extra}
    if milli is not None:
        exactly["capacity"] = {"requests": {"milli": milli}}
    return {"name": name, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}


def submit_share(s: Sim, name: str, milli: str | None, count: int = 1, pods_: int = 1, group=basic,
                 tpl: dict[str, Any] | None = None, **extra: Any) -> list[ev.Event]:
    tpl = tpl or share_tpl("t", milli, count)
    entry = with_claims(pods(pods_, cpu="1"), ("gpu", tpl["name"]))
    grp = gang("g", pods_, entry) if group is gang else basic("g", entry)
    return s.submit(name, grp, resourceClaimTemplates=[tpl], **extra)


def consumed(s: Sim, wl: str) -> list[tuple[str, dict[str, str]]]:
    return [(d["device"], d.get("consumedCapacity")) for c in s.group(wl)["claims"] for d in c["devices"]]


def usage(s: Sim, slice_name: str = "n1-gpus") -> list[dict[str, Any]]:
    return next(o for o in object_views(s.state, "resourceslices") if o["name"] == slice_name)["deviceUsage"]


def cluster() -> Sim:
    s = Sim("prod")
    device_class(s)
    return s


# -- rounding and consumption --------------------------------------------------------------------
def test_valid_range_rounds_up_to_the_step_and_to_min_and_refuses_above_max():
    cap = capacity.Cap(1000, 1000, None, 10, 1000, 10)
    assert capacity.consume(cap, 455) == 460
    assert capacity.consume(cap, 5) == 10
    assert capacity.consume(cap, 1010) is None
    assert capacity.consume(cap, None) == 1000


def test_valid_values_take_the_smallest_not_below_the_amount():
    cap = capacity.Cap(1000, 250, (250, 500, 1000))
    assert capacity.consume(cap, 300) == 500 and capacity.consume(cap, 250) == 250
    assert capacity.consume(cap, 1001) is None and capacity.consume(cap, None) == 250


def test_canonical_amounts_use_the_largest_binary_suffix():
    assert [capacity.canonical(v) for v in (470, 1000, 1024, 16 * 2**30, 1536, 0)] == \
        ["470", "1000", "1Ki", "16Gi", "1536", "0"]


def test_shares_fit_by_capacity_and_the_rounding_counts():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0", policy={"default": "1000", "validRange": {"min": "10", "max": "1000", "step": "10"}})])
    submit_share(s, "a", "455")
    submit_share(s, "b", "455")
    assert consumed(s, "a") == [("gpu-0", {"milli": "460"})] and consumed(s, "b") == [("gpu-0", {"milli": "460"})]
    submit_share(s, "c", "90")  # 920 + 90 > 1000
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]
    submit_share(s, "d", "80")  # 920 + 80 = 1000
    assert consumed(s, "d") == [("gpu-0", {"milli": "80"})]
    s.assert_replay_equal()


def test_an_unnamed_capacity_without_default_is_consumed_whole():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0", memory="16Gi", memory_policy=False)])
    submit_share(s, "a", "300")
    assert consumed(s, "a") == [("gpu-0", {"memory": "16Gi", "milli": "300"})]
    submit_share(s, "b", "300")  # memory is all taken
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]


def test_a_request_naming_nothing_consumes_every_capacity_whole_or_its_default():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0", memory="16Gi")])
    submit_share(s, "a", None)
    assert consumed(s, "a") == [("gpu-0", {"memory": "0", "milli": "1000"})]


def test_a_requested_name_must_be_the_devices_as_written():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0")])
    s.submit("a", basic("g", with_claims(pods(1, cpu="1"), ("gpu", "t"))), resourceClaimTemplates=[
        {"name": "t", "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu", "capacity": {"requests": {f"{GPU}/milli": "100"}}}}]}}}])
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]


def test_on_an_exclusive_device_a_capacity_request_is_a_filter():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0", "500", shareable=False), sgpu("gpu-1", "1000", shareable=False)])
    submit_share(s, "a", "600")
    assert consumed(s, "a") == [("gpu-1", None)]
    d = s.group("a")["claims"][0]["devices"][0]
    assert set(d) == {"driver", "pool", "device"}  # an exclusive device keeps its shape
    submit_share(s, "b", "100")
    assert consumed(s, "b") == [("gpu-0", None)]
    submit_share(s, "c", "100")
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]


def test_one_request_never_takes_the_same_device_twice():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0")])
    submit_share(s, "a", "300", count=2)
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]


def test_two_requests_of_one_claim_may_share_a_device_and_distinct_attribute_keeps_them_apart():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0", index=0), sgpu("gpu-1", index=1)])
    reqs = [{"name": r, "exactly": {"deviceClassName": "gpu", "capacity": {"requests": {"milli": "300"}}}}
            for r in ("a", "b")]
    tpl = {"name": "t", "spec": {"devices": {"requests": reqs}}}
    submit_share(s, "same", None, tpl=tpl)
    assert consumed(s, "same") == [("gpu-0", {"milli": "300"}), ("gpu-0", {"milli": "300"})]
    tpl2 = {"name": "t", "spec": {"devices": {"requests": reqs, "constraints": [{"distinctAttribute": "index"}]}}}
    submit_share(s, "apart", None, tpl=tpl2)
    assert [d for d, _ in consumed(s, "apart")] == ["gpu-0", "gpu-1"]
    s.assert_replay_equal()


def test_share_id_is_the_uuid5_of_the_spec_name():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0")])
    submit_share(s, "w", "470")
    wl = s.state.workloads[("default", "w")]
    d = s.group("w")["claims"][0]["devices"][0]
    assert d["shareID"] == str(uuid.uuid5(uuid.NAMESPACE_URL, f"prod/{wl.position}/Pod/g/p-0/gpu/gpu/0"))
    assert d["consumedCapacity"] == {"milli": "470"}


def test_device_usage_lists_allocations_for_whom_and_the_sums():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0", memory="16Gi"), sgpu("gpu-1", memory="16Gi")])
    submit_share(s, "a", "470")
    submit_share(s, "b", "470")
    u = usage(s)
    assert [e["name"] for e in u] == ["gpu-0", "gpu-1"]
    assert u[0]["consumedCapacity"] == {"milli": "940", "memory": "0"}
    assert u[1] == {"name": "gpu-1", "consumedCapacity": {"milli": "0", "memory": "0"}, "allocations": []}
    ids = [a["shareID"] for a in u[0]["allocations"]]
    assert ids == sorted(ids) and {a["workload"] for a in u[0]["allocations"]} == {"a", "b"}
    a = u[0]["allocations"][0]
    assert set(a) == {"namespace", "workload", "podGroup", "pod", "claim", "sharing", "request", "shareID",
                      "consumedCapacity"}


def test_deletion_frees_the_share_and_a_pending_pod_takes_it():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0")])
    submit_share(s, "a", "600")
    submit_share(s, "b", "600")
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]
    s.delete("a")
    assert ev.POD_GROUP_SCHEDULED in s.types()
    assert consumed(s, "b") == [("gpu-0", {"milli": "600"})]
    assert usage(s)[0]["consumedCapacity"] == {"milli": "600"}
    s.assert_replay_equal()


def test_node_loss_frees_what_its_pods_consumed():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0")])
    submit_share(s, "a", "600")
    s.run("RemoveResourceSlice", "n1-gpus")
    assert s.group("a")["placedPods"] == 0
    assert s.state.dra.used == {} and s.state.dra.nshares == {}
    s.assert_replay_equal()


def test_a_gang_of_sharing_pods_is_all_or_nothing():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0"), sgpu("gpu-1")])
    submit_share(s, "g5", "400", pods_=5, group=gang)  # four fit (two per GPU), not five
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]
    assert s.state.dra.used == {}
    submit_share(s, "g4", "400", pods_=4, group=gang)
    assert s.group("g4")["placedPods"] == 4
    s.assert_replay_equal()


def test_a_group_claim_over_a_shareable_device_is_consumed_once():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0")])
    tpl = share_tpl("t", "600")
    grp = basic("g", with_claims(pods(3, cpu="1"), ("gpu", "t")), resourceClaims=[
        {"name": "gpu", "resourceClaimTemplateName": "t"}])
    s.submit("w", grp, resourceClaimTemplates=[tpl])
    assert s.group("w")["placedPods"] == 3
    assert usage(s)[0]["consumedCapacity"] == {"milli": "600"}
    assert [a["pod"] for a in usage(s)[0]["allocations"]] == [None]


def test_a_device_made_exclusive_takes_nothing_new_while_shares_remain():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0")])
    submit_share(s, "a", "300")
    s.run("UpsertResourceSlice", "n1-gpus", body={"driver": GPU, "pool": {"name": "n1", "generation": 2},
                                                  "nodeName": "n1", "devices": [sgpu("gpu-0", shareable=False)]})
    assert s.group("a")["placedPods"] == 1
    submit_share(s, "b", "300")
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]
    s.delete("a")
    assert s.group("b")["placedPods"] == 1 and consumed(s, "b") == [("gpu-0", None)]


def test_preemption_frees_consumed_capacity_and_keeps_a_victim_that_still_fits():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0")])
    submit_share(s, "low-a", "400", priority=1)
    submit_share(s, "low-b", "400", priority=1)
    submit_share(s, "high", "500", priority=10)  # needs one of the two freed, not both
    victims = [e.data["workload"] for e in s.last if e.type == ev.POD_GROUP_PREEMPTED]
    assert len(victims) == 1
    assert s.group("high")["placedPods"] == 1
    total = sum(int(c["milli"]) for _, c in consumed(s, "high") + consumed(s, "low-a") + consumed(s, "low-b") if c)
    assert total <= 1000
    s.assert_replay_equal()


# -- properties -------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["submit", "delete"]), st.integers(0, 7), st.integers(1, 10),
                          st.integers(1, 3), st.booleans()), min_size=1, max_size=14), st.booleans())
def test_no_device_over_capacity_gangs_all_or_nothing_and_replay_equals_live(steps, fragmentation_aware):
    s = cluster()
    if fragmentation_aware:
        from tests.domain.test_fragmentation import configure, fa, share
        configure(s, fa([share("300", 3), share("1000", 1), {"weight": 1, "cpu": "1"}]))
    gpu_node(s, "n1", [sgpu("gpu-0", memory="16Gi"), sgpu("gpu-1")], cpu="8")
    gpu_node(s, "n2", [sgpu("gpu-0", "500", policy={"default": "500", "validValues": ["100", "250", "500"]}),
                       sgpu("gpu-1", shareable=False)], cpu="8")
    live: set[str] = set()
    for i, (op, w, tenths, n, is_gang) in enumerate(steps):
        name = f"w{w}"
        if op == "delete":
            if name in live:
                s.delete(name)
                live.discard(name)
            continue
        if name in live or any(k[1] == name for k in s.state.workloads):
            continue
        submit_share(s, name, str(tenths * 100), pods_=n, group=gang if is_gang else basic,
                     priority=i % 3)
        live.add(name)
        for o in object_views(s.state, "resourceslices"):
            for sl in s.state.dra.slices.values():
                if sl.name != o["name"]:
                    continue
                for u in o["deviceUsage"]:
                    caps = s.state.dra.devices[s.state.dra.ident_id[sl.ident(u["name"])]].caps
                    for cname, text in (u.get("consumedCapacity") or {}).items():
                        assert capacity.parse_amounts({cname: text})[0][1] <= caps[cname].value
        for wl in s.state.workloads.values():
            for g in wl.groups:
                if g.spec.gang:
                    assert g.placed == 0 or g.placed >= g.spec.min_count
    s.assert_replay_equal()


# -- validation (sharing.md's table) ---------------------------------------------------------------
def _slice_errors(device: dict[str, Any]) -> list[tuple[Any, ...]]:
    from service.schemas.errors import InputValidationError
    from service.schemas.validate import validate_body
    body = {"driver": GPU, "pool": {"name": "n1"}, "nodeName": "n1", "devices": [device]}
    try:
        validate_body("ResourceSlice", body, name="s")
    except InputValidationError as exc:
        return [tuple(e["loc"]) for e in exc.errors]
    return []


def _policy(policy: dict[str, Any], shareable: bool = True, value: str = "1000") -> list[tuple[Any, ...]]:
    d: dict[str, Any] = {"name": "gpu-0", "capacity": {"milli": {"value": value, "requestPolicy": policy}}}
    if shareable:
        d["allowMultipleAllocations"] = True
    return [loc[loc.index("requestPolicy"):] for loc in _slice_errors(d) if "requestPolicy" in loc]


def test_request_policy_validation_names_each_field():
    rng = {"min": "10", "max": "1000", "step": "10"}
    assert _policy({"default": "1000", "validRange": rng}) == []
    assert _policy({"default": "1000", "validRange": rng}, shareable=False) == [("requestPolicy",)]
    assert _policy({"default": "10", "validValues": ["10"], "validRange": rng}) == [("requestPolicy",)]
    assert _policy({"validRange": rng}) == [("requestPolicy", "default")]
    assert _policy({"default": "10", "validValues": ["10", "5"]}) == [("requestPolicy", "validValues", 1)]
    assert _policy({"default": "10", "validValues": ["10", "2000"]}) == [("requestPolicy", "validValues", 1)]
    assert _policy({"default": "20", "validValues": ["10"]}) == [("requestPolicy", "validValues")]
    assert _policy({"default": "10", "validValues": [str(i) for i in range(1, 12)]})[0][:2] == \
        ("requestPolicy", "validValues")
    assert _policy({"default": "10", "validRange": {"max": "100"}}) == [("requestPolicy", "validRange", "min")]
    assert _policy({"default": "5", "validRange": {"min": "10"}}) == [("requestPolicy", "validRange", "min")]
    assert set(_policy({"default": "10", "validRange": {"min": "10", "max": "5"}})) == \
        {("requestPolicy", "validRange", "max")}
    assert _policy({"default": "10", "validRange": {"min": "10", "max": "2000"}}) == \
        [("requestPolicy", "validRange", "max")]
    assert _policy({"default": "15", "validRange": {"min": "10", "step": "10"}}) == \
        [("requestPolicy", "validRange", "step")]
    assert _policy({"default": "10", "validRange": {"min": "10", "step": "0"}}) == \
        [("requestPolicy", "validRange", "step")]


def test_fractional_capacity_is_refused():
    d = {"name": "gpu-0", "allowMultipleAllocations": True, "capacity": {"milli": {"value": "0.5"}}}
    assert any(loc[-3:] == ("capacity", "milli", "value") for loc in _slice_errors(d))
