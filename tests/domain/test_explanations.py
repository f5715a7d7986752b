"""Explanation wording (issue 18, point 4): victims' `why` and `wholeGroup`, per-node reasons
when every topology domain fails, and the gang's count against minCount in the message."""
from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from service.domain.model import events as ev
from service.domain.model.reasons import victim_words
from service.domain.nodes import filters
from service.domain.placement import domains
from tests.domain.sim import Sim, basic, gang, pods
from tests.domain.test_devices import device_class, gpus_node, template, with_claims


def cluster(*sizes: int) -> Sim:
    s = Sim()
    for i, size in enumerate(sizes):
        s.node(f"n{i + 1}", pods=size)
    return s


def victims(s: Sim) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(PodGroupPreempted data, the matching entry of the preemptor's preemption.victims)."""
    events = [e.data for e in s.last if e.type == ev.POD_GROUP_PREEMPTED]
    listed = next(e.data["preemption"]["victims"] for e in s.last if e.data.get("preemption"))
    assert len(events) == len(listed)
    return list(zip(events, listed))


def one_victim(s: Sim) -> tuple[bool, str]:
    (event, listed), = victims(s)
    # the same unit in both, as codes with minCount; the words are rendered when read
    assert {k: event[k] for k in ("wholeGroup", "reason", "minCount")} == \
        {k: listed[k] for k in ("wholeGroup", "reason", "minCount")}
    assert victim_words(event) == victim_words(listed)
    return event["wholeGroup"], victim_words(event)


# -- victims: why = the kind of unit and why it is that kind; wholeGroup = did the group go ------
def test_single_pod_victim_of_a_basic_group_says_it_was_all_its_pods():
    s = cluster(1)
    s.submit("low", basic("b", pods(1)), priority=1)
    s.submit("high", basic("b", pods(1)), priority=10)
    assert one_victim(s) == (True, "single pods: a basic group's pods go one by one; "
                                   "these were all its placed pods")


def test_one_pod_of_a_larger_basic_group_is_not_the_whole_group():
    s = cluster(1, 1)
    s.submit("low", basic("b", pods(2)), priority=1)
    s.submit("high", basic("b", pods(1)), priority=10)
    assert one_victim(s) == (False, "single pods: a basic group's pods go one by one")
    assert s.group("low")["placedPods"] == 1


def test_disruption_mode_all_is_a_whole_group_unit():
    s = cluster(1, 1)
    s.submit("low", basic("b", pods(2), disruptionMode="All"), priority=1)
    s.submit("high", basic("b", pods(1)), priority=10)
    assert one_victim(s) == (True, "whole group: its disruptionMode is All")


def test_gang_without_surplus_is_a_whole_group_unit():
    s = cluster(2)
    s.submit("low", gang("g", 2, pods(2)), priority=1)
    s.submit("high", gang("g", 1, pods(1)), priority=10)
    assert one_victim(s) == (True, "whole group: a gang with no pods placed above minCount 2")


def test_gang_surplus_goes_as_single_pods():
    s = cluster(4)
    s.submit("low", gang("g", 2, pods(4)), priority=1)
    s.submit("high", gang("g", 2, pods(2)), priority=10)
    assert one_victim(s) == (False, "single pods: the gang's pods above minCount 2 go one by one")


def test_gang_that_would_drop_below_min_count_goes_whole():
    s = cluster(3)
    s.submit("low", gang("g", 2, pods(3)), priority=1)  # surplus 1
    s.submit("high", gang("g", 2, pods(2)), priority=10)  # needs 2 pods' room
    assert one_victim(s) == (True, "whole group: as single pods the gang would have dropped below minCount 2")
    assert s.group("low")["placedPods"] == 0


# -- every topology domain fails: each node under its own reason ----------------------------
def _racks(s: Sim) -> None:
    for name in ("a1", "a2"):
        s.node(name, labels={"rack": "r1"}, cpu="2")
    for name in ("b1", "b2"):
        s.node(name, labels={"rack": "r2"}, cpu="2")
    s.node("b3", labels={"rack": "r2"}, cpu="2", unschedulable=True)
    s.node("c1", labels={"rack": "r3"}, cpu="500m")  # not even one pod fits: explained without a try
    s.node("loose", cpu="64")  # no rack label: the only node outside every domain


def _reasons(s: Sim, wl: str) -> dict[str, int]:
    return {r["message"]: r["nodes"] for r in s.group(wl)["explanation"]["reasons"]}


def test_every_domain_failing_counts_each_node_under_its_own_reason():
    s = Sim()
    _racks(s)
    s.submit("t", gang("w", 5, pods(5, cpu="1"), topology={"key": "rack"}))  # each rack holds 4
    assert _reasons(s, "t") == {"Insufficient cpu": 5, filters.UNSCHEDULABLE: 1, filters.TOPOLOGY: 1}
    expl = s.group("t")["explanation"]
    assert expl["placeablePods"] == 4
    assert expl["message"] == (f"0/7 nodes are available: 1 {filters.TOPOLOGY}, 1 {filters.UNSCHEDULABLE}, "
                               "5 Insufficient cpu. 4/5 pods of the gang fit, minCount 5.")


def test_every_domain_failing_for_pods_of_two_shapes():
    s = Sim()
    _racks(s)
    # two shapes: every domain is tried in full (not the uniform shortcut)
    s.submit("t", gang("w", 5, pods(3, cpu="1"), pods(2, name="q", cpu="2"), topology={"key": "rack"}))
    # r1 and r2 each fail at q-0 after three pods, r3 at p-0
    assert _reasons(s, "t") == {"Insufficient cpu": 5, filters.UNSCHEDULABLE: 1, filters.TOPOLOGY: 1}
    assert s.group("t")["explanation"]["placeablePods"] == 3


def test_one_domain_left_keeps_topology_for_the_nodes_outside_it():
    s = Sim()
    _racks(s)
    s.submit("t", gang("w", 1, pods(6, cpu="1"), topology={"key": "rack"}))  # 4 in r1, 2 wait
    assert s.group("t")["placedPods"] == 4
    # the leftovers must stay in r1: every node outside it is outside the domain
    assert _reasons(s, "t") == {"Insufficient cpu": 2, filters.UNSCHEDULABLE: 1, filters.TOPOLOGY: 4}


def test_every_domain_failing_on_devices_sums_the_device_detail():
    s = Sim()
    device_class(s)
    for rack, name in (("r1", "g1"), ("r2", "g2")):
        gpus_node(s, name, [0, 0], labels={"rack": rack})  # 2 GPUs each, 4 wanted
    tpl = template("four", count=4)
    entry = with_claims(pods(1), ("gpus", "four"))
    s.submit("t", basic("g", entry, topology={"key": "rack"}), resourceClaimTemplates=[tpl])
    assert _reasons(s, "t") == {filters.DEVICES: 2}
    claims = s.group("t")["explanation"]["devices"]["claims"]
    assert [(c["reason"], c["nodes"], c["available"]) for c in claims] == [("InsufficientDevices", 2, 2)]


@settings(max_examples=40, deadline=None)
@given(racks=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=3), min_size=1, max_size=4),
       unlabelled=st.integers(0, 2), size=st.integers(1, 8))
def test_topology_reason_only_for_nodes_outside_every_domain(racks: list[list[int]], unlabelled: int,
                                                              size: int):
    s = Sim()
    for r, rack in enumerate(racks):
        for i, cpu in enumerate(rack):
            s.node(f"r{r}-{i}", labels={"rack": f"r{r}"}, cpu=str(cpu or 1), unschedulable=cpu == 0)
    for i in range(unlabelled):
        s.node(f"x{i}", cpu="64")
    s.submit("t", gang("w", size, pods(size, cpu="1"), topology={"key": "rack"}))
    if s.group("t")["placedPods"]:
        return
    reasons = _reasons(s, "t")
    assert reasons.get(filters.TOPOLOGY, 0) == unlabelled
    assert sum(reasons.values()) == sum(len(r) for r in racks) + unlabelled  # one reason per node


@settings(max_examples=30, deadline=None)
@given(racks=st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=3), min_size=2, max_size=4),
       size=st.integers(2, 9), cpu=st.integers(1, 2))
def test_uniform_shortcut_explains_as_a_try_per_domain_would(racks: list[list[int]], size: int, cpu: int):
    def run() -> dict[str, Any]:
        s = Sim()
        for r, rack in enumerate(racks):
            for i, free in enumerate(rack):
                s.node(f"r{r}-{i}", labels={"rack": f"r{r}"}, cpu=str(free or 1), pods=free + 1)
        s.node("x", cpu="64")
        s.submit("fill", basic("f", pods(1, cpu="1")))  # some usage before the gang
        s.submit("t", gang("w", size, pods(size, cpu=str(cpu)), topology={"key": "rack"}))
        return s.group("t")["explanation"]

    shortcut = run()
    with mock.patch.object(domains, "uniform_domains", lambda *args: None):
        assert run() == shortcut


# -- the message counts the gang against minCount ------------------------------------------
def test_gang_message_says_how_many_pods_fit_against_min_count():
    s = Sim()
    s.node("n1", cpu="2")
    s.submit("g", gang("w", 3, pods(3, cpu="1")))
    assert s.group("g")["explanation"]["message"] == ("0/1 nodes are available: 1 Insufficient cpu. "
                                                      "2/3 pods of the gang fit, minCount 3.")


def test_basic_group_message_has_no_gang_count():
    s = Sim()
    s.node("n1", cpu="1")
    s.submit("b", basic("w", pods(2, cpu="1")))
    assert s.group("b")["explanation"]["message"] == "0/1 nodes are available: 1 Insufficient cpu."
