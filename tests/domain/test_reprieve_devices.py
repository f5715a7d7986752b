"""The reprieve's device check (sharing.md *Preemption*; model.md *Preemption* step 3): a unit is
kept only when, with the preemptor's allocations in place, putting it back takes no exclusive device
given to the preemptor and leaves every capacity of every device within its value; putting back a
pod of a group (workload) with no pod placed brings its group (workload) claims back with it."""
from __future__ import annotations

from service.domain.model import events as ev
from tests.domain.sim import Sim, basic, pods
from tests.domain.test_composite import cpg, submit_tree
from tests.domain.test_devices import with_claims
from tests.domain.test_sharing import cluster, gpu_node, sgpu, share_tpl, submit_share, usage


def milli(s: Sim) -> int:
    return int(usage(s)[0]["consumedCapacity"]["milli"])


def victims(s: Sim) -> list[tuple[str, list[str]]]:
    return [(e.data["workload"], [p["pod"] for p in e.data["pods"]]) for e in s.last
            if e.type == ev.POD_GROUP_PREEMPTED]


def share_tree(s: Sim, name: str, milli_: str, priority: int) -> None:
    entry = with_claims(pods(1, cpu="1"), ("gpu", "t"))
    tree = cpg("root", [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 1}}, "pods": [entry]}])
    submit_tree(s, name, tree, priority=priority, resourceClaimTemplates=[share_tpl("t", milli_)])


def test_a_tree_preemptor_does_not_reprieve_a_share_that_no_longer_fits():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0")])
    submit_share(s, "lo", "600", priority=0)
    share_tree(s, "hi", "600", priority=100)
    assert victims(s) == [("lo", ["p-0"])]
    scheduled = next(e.data for e in s.last if e.type == ev.COMPOSITE_POD_GROUP_SCHEDULED)
    assert scheduled["preemption"]["reprieved"] == []
    assert milli(s) == 600
    s.assert_replay_equal()


def test_a_flat_preemptor_with_a_lower_tree_among_its_candidates_checks_shares():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0")])
    s.node("n2", cpu="4")
    submit_tree(s, "t", cpg("root", [basic("w", pods(1, cpu="1"))]), priority=0)  # a tree without devices
    submit_share(s, "lo", "600", priority=0)
    submit_share(s, "hi", "600", priority=100)
    assert victims(s) == [("lo", ["p-0"])]
    assert milli(s) == 600
    s.assert_replay_equal()


def test_a_reprieved_pod_brings_back_its_group_claim():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0")])
    grp = basic("g", with_claims(pods(2, cpu="1"), ("gpu", "t")),
                resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}])
    s.submit("lo", grp, resourceClaimTemplates=[share_tpl("t", "600")], priority=0)
    assert s.group("lo")["placedPods"] == 2
    submit_share(s, "hi", "600", priority=100)
    assert victims(s) == [("lo", ["p-0", "p-1"])]  # keeping p-1 would keep the group claim's 600
    assert s.group("hi")["placedPods"] == 1 and s.group("lo")["placedPods"] == 0
    assert milli(s) == 600
    s.assert_replay_equal()


def test_a_reprieved_group_brings_back_its_workloads_claim():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0")])
    a = basic("a", with_claims(pods(1, cpu="1"), ("gpu", "t")))
    b = basic("b", pods(1, cpu="1"))
    s.submit("lo", a, b, resourceClaimTemplates=[share_tpl("t", "600")],
             resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}], priority=0)
    assert s.group("lo", "a")["placedPods"] == 1 and s.group("lo", "b")["placedPods"] == 1
    submit_share(s, "hi", "600", priority=100)
    assert sorted(victims(s)) == [("lo", ["p-0"]), ("lo", ["p-0"])]  # b kept would keep the claim
    assert milli(s) == 600
    s.assert_replay_equal()
