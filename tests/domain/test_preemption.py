"""Workload-aware preemption (model.md *Preemption*); capacity counted in pods."""
from service.domain.model import events as ev
from service.domain.model.reasons import render_explanation
from tests.domain.sim import Sim, basic, gang, pods


def cluster(*sizes: int) -> Sim:
    s = Sim()
    for i, size in enumerate(sizes):
        s.node(f"n{i + 1}", pods=size)
    return s


def preempted(sim: Sim) -> list[dict]:
    return [e.data for e in sim.last if e.type == ev.POD_GROUP_PREEMPTED]


def test_plain_pod_goes_before_a_gang_member():
    s = cluster(2)
    s.submit("plain", basic("b", pods(1)), priority=1)
    s.submit("lowgang", gang("g", 1, pods(1)), priority=1)
    s.submit("high", basic("b", pods(1)), priority=10)
    victims = preempted(s)
    assert [(v["workload"], [p["pod"] for p in v["pods"]]) for v in victims] == [("plain", ["p-0"])]
    assert s.placements("high") == {"p-0": "n1"}
    assert s.placements("lowgang") == {"p-0": "n1"}


def test_all_mode_group_spread_over_two_nodes_goes_whole():
    s = cluster(1, 1)
    s.submit("low", basic("b", pods(2), disruptionMode="All"), priority=1)
    assert set(s.placements("low").values()) == {"n1", "n2"}
    s.submit("high", basic("b", pods(1)), priority=10)
    victims = preempted(s)
    assert len(victims) == 1 and victims[0]["wholeGroup"] is True
    assert len(victims[0]["pods"]) == 2
    # the victim is pending again, but keeps trying: one node is still free
    assert s.group("low")["placedPods"] in (0, 1)


def test_mid_pod_kept_while_low_all_group_goes():
    s = cluster(1, 1, 1)
    s.submit("mid", basic("b", pods(1)), priority=5)
    s.submit("low", basic("b", pods(2), disruptionMode="All"), priority=1)
    s.submit("high", basic("b", pods(2)), priority=10)
    # high pod 0 fits nowhere: candidates are the low All-group (whole) and the mid pod
    victims = preempted(s)
    assert [v["workload"] for v in victims] == ["low"]
    assert s.group("mid")["placedPods"] == 1


def test_three_pod_preemptor_min_one_evicts_exactly_the_two_low_pods():
    s = cluster(1, 1, 1, 1)
    s.submit("low1", basic("b", pods(1)), priority=1)
    s.submit("low2", basic("b", pods(1)), priority=1)
    s.submit("hi1", basic("b", pods(1)), priority=100)
    s.submit("hi2", basic("b", pods(1)), priority=100)
    s.submit("pre", gang("g", 1, pods(3)), priority=50)
    victims = preempted(s)
    assert sorted(v["workload"] for v in victims) == ["low1", "low2"]
    assert s.group("pre")["placedPods"] == 2
    assert s.group("hi1")["placedPods"] == 1 and s.group("hi2")["placedPods"] == 1


def test_low_gang_gives_up_surplus_and_keeps_running():
    s = cluster(4)
    s.submit("low", gang("g", 2, pods(4)), priority=1)
    s.submit("high", gang("g", 2, pods(2)), priority=10)
    victims = preempted(s)
    assert len(victims) == 1 and len(victims[0]["pods"]) == 2 and victims[0]["wholeGroup"] is False
    assert s.group("low")["placedPods"] == 2 and s.group("low")["phase"] == "Scheduled"
    assert s.group("high")["placedPods"] == 2


def test_of_two_low_gangs_without_surplus_exactly_one_goes():
    s = cluster(2, 2)
    s.submit("low-a", gang("g", 2, pods(2)), priority=1)
    s.submit("low-b", gang("g", 2, pods(2)), priority=1)
    s.submit("high", gang("g", 2, pods(2)), priority=10)
    victims = preempted(s)
    assert len(victims) == 1 and victims[0]["wholeGroup"] is True
    running = [w for w in ("low-a", "low-b") if s.group(w)["placedPods"] == 2]
    assert len(running) == 1


def test_equal_priority_never_touched():
    s = cluster(1)
    s.submit("a", basic("b", pods(1)), priority=5)
    s.submit("b", basic("b", pods(1)), priority=5)
    assert preempted(s) == []
    expl = s.group("b")["explanation"]
    assert expl["preemption"] == "NoLowerPriorityVictims"


def test_preemptor_that_cannot_fit_evicts_nothing():
    s = cluster(1, 1)
    s.submit("low", basic("b", pods(2)), priority=1)
    s.submit("big", gang("g", 3, pods(3)), priority=10)
    assert preempted(s) == []
    assert s.group("low")["placedPods"] == 2
    assert s.group("big")["explanation"]["preemption"] == "PreemptionWouldNotHelp"


def test_lower_priority_goes_first():
    s = cluster(1, 1)
    s.submit("p10", basic("b", pods(1)), priority=10)
    s.submit("p5", basic("b", pods(1)), priority=5)
    s.submit("high", basic("b", pods(1)), priority=100)
    victims = preempted(s)
    assert [v["workload"] for v in victims] == ["p5"]


def test_never_policy_does_not_preempt():
    s = cluster(1)
    s.submit("low", basic("b", pods(1)), priority=1)
    s.submit("high", basic("b", pods(1)), priority=10, preemptionPolicy="Never")
    assert preempted(s) == []
    assert s.group("high")["explanation"]["preemption"] == "PreemptionNotAllowed"


def test_victims_get_disruption_target_and_requeue_in_place():
    s = cluster(1, 1)
    s.submit("low", gang("g", 2, pods(2)), priority=1)
    s.submit("high", basic("b", pods(1)), priority=10)
    g = s.group("low")
    assert g["phase"] == "Pending" and g["placedPods"] == 0
    cond = [c for c in g["conditions"] if c["type"] == "DisruptionTarget"]
    assert cond and "preempted by default/high (priority 10)" in cond[0]["message"]
    sched = [e.data for e in s.last if e.type == ev.POD_GROUP_SCHEDULED and e.data["workload"] == "high"]
    assert sched[0]["preemption"]["victims"][0]["workload"] == "low"
    s.delete("high")
    assert s.group("low")["placedPods"] == 2
    s.assert_replay_equal()


def test_first_sufficient_prefix_for_pods_of_two_shapes():
    """Removing units least important first, the first prefix that lets the routine place k pods
    wins, even when a longer prefix would place fewer (the count need not grow with the prefix)."""
    s = Sim()
    s.node("v", cpu="2", example_com_gpu="1")
    s.node("w", cpu="2")
    s.submit("u1", basic("b", pods(1, cpu="1")), priority=1)
    s.submit("u2", basic("b", pods(1, example_com_gpu="1")), priority=2)
    s.submit("u3", basic("b", pods(1, cpu="2")), priority=3)
    s.node("p", cpu="1", example_com_gpu="4")
    assert s.placements("u1") == {"p-0": "v"} and s.placements("u2") == {"p-0": "v"}
    assert s.placements("u3") == {"p-0": "w"}
    s.submit("pre", gang("g", 2, pods(1, "s", cpu="1", example_com_gpu="1"), pods(1, "t", cpu="2")), priority=10)
    # u1 alone lets both pods in (s-0 on p, t-0 on v); {u1, u2} would place only one
    assert [v["workload"] for v in preempted(s)] == ["u1"]
    assert s.placements("pre") == {"s-0": "p", "t-0": "v"}
    assert s.group("u2")["placedPods"] == 1 and s.group("u3")["placedPods"] == 1


def test_topology_preemptor_takes_the_domain_that_the_least_important_victims_free():
    """The domain is the routine's choice after removing the first sufficient prefix, not the one
    chosen with every candidate removed."""
    s = Sim()
    s.node("a", labels={"zone": "z1"}, cpu="2")
    s.node("b", labels={"zone": "z2"}, cpu="2")
    s.submit("u2", basic("b", pods(1, cpu="2")), priority=2)
    s.submit("u1", basic("b", pods(1, cpu="2")), priority=1)
    assert s.placements("u2") == {"p-0": "a"} and s.placements("u1") == {"p-0": "b"}
    s.submit("pre", gang("g", 2, pods(2, cpu="1"), topology={"key": "zone"}), priority=10)
    assert [v["workload"] for v in preempted(s)] == ["u1"]
    assert s.placements("pre") == {"p-0": "b", "p-1": "b"}
    assert s.placements("u2") == {"p-0": "a"}


def test_leftover_pod_of_a_basic_group_preempts_in_the_pass_that_placed_the_first():
    s = Sim()
    s.node("a", cpu="1")
    s.node("b", cpu="1")
    s.submit("low", basic("b", pods(1, cpu="1")), priority=0)
    assert s.placements("low") == {"p-0": "a"}
    s.submit("bb", basic("b", pods(2, cpu="1")), priority=10)
    # p-0 takes the free node b; p-1 preempts the low pod in the same pass, no other input needed
    assert s.types() == [ev.POD_GROUP_SCHEDULED, ev.POD_GROUP_PREEMPTED, ev.PODS_SCHEDULED,
                         ev.POD_GROUP_UNSCHEDULABLE]
    assert s.placements("bb") == {"p-0": "b", "p-1": "a"}
    assert s.group("low")["placedPods"] == 0
    s.assert_replay_equal()


def test_basic_group_placed_by_preemption_explains_its_other_pods():
    s = Sim()
    s.node("a", cpu="1")
    s.submit("low", basic("b", pods(1, cpu="1")), priority=0)
    s.submit("hi", basic("b", pods(2, cpu="1")), priority=10)
    assert s.placements("hi") == {"p-0": "a", "p-1": None}
    scheduled = next(e for e in s.last if e.type == ev.POD_GROUP_SCHEDULED)
    explanation = scheduled.data["explanation"]
    assert render_explanation(explanation)["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert explanation["reasons"] == [{"reason": "Insufficient", "resource": "cpu", "nodes": 1}]
    assert s.group("hi")["explanation"]["reasons"] == [{**explanation["reasons"][0], "message": "Insufficient cpu"}]


def test_leftover_basic_pod_that_cannot_preempt_records_why_in_the_placement():
    s = Sim()
    s.node("a", cpu="1")
    s.submit("hi", basic("b", pods(2, cpu="1")), priority=10)
    assert s.types() == [ev.POD_GROUP_SCHEDULED]
    explanation = s.last[0].data["explanation"]
    assert explanation["preemption"] == "NoLowerPriorityVictims"
    assert explanation["reasons"] == [{"reason": "Insufficient", "resource": "cpu", "nodes": 1}]
    assert s.group("hi")["explanation"] == render_explanation(explanation)
    s.assert_replay_equal()
