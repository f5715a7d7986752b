"""The scheduling rules of model.md, one example each."""
from service.domain.model import events as ev
from service.domain.model.reasons import render_explanation
from tests.domain.sim import Sim, basic, gang, pods


def test_gang_waits_then_runs_when_room_appears():
    s = Sim()
    s.node("n1", cpu="4")
    s.submit("filler", basic("b", pods(1, cpu="3")))
    s.submit("train", gang("w", 2, pods(2, cpu="2")))
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]
    assert s.group("train")["placedPods"] == 0 and s.group("train")["phase"] == "Pending"
    s.delete("filler")
    assert s.types() == [ev.POD_GROUP_SCHEDULED]
    assert s.placements("train") == {"p-0": "n1", "p-1": "n1"}
    assert s.wl("train")["status"]["phase"] == "Scheduled"


def test_surplus_pods_placed_and_leftovers_later_one_by_one():
    s = Sim()
    s.node("n1", cpu="3")
    s.submit("train", gang("w", 2, pods(4, cpu="1")))
    data = s.last[0].data
    assert s.last[0].type == ev.POD_GROUP_SCHEDULED and len(data["pods"]) == 3
    assert data["explanation"]["placeablePods"] == 3
    assert render_explanation(data["explanation"])["message"] == ("0/1 nodes are available: 1 Insufficient cpu. "
                                              "3/4 pods of the gang fit, minCount 2.")
    assert s.group("train")["phase"] == "Scheduled" and s.group("train")["explanation"] is not None
    s.node("n2", cpu="1")
    assert s.types() == [ev.PODS_SCHEDULED]
    assert s.placements("train")["p-3"] == "n2"
    assert s.group("train")["explanation"] is None


def test_two_competing_gangs_never_split_capacity():
    s = Sim()
    s.node("n1", cpu="4")
    s.submit("a", gang("w", 3, pods(3, cpu="2")))
    s.submit("b", gang("w", 3, pods(3, cpu="2")))
    assert s.group("a")["placedPods"] == 0 and s.group("b")["placedPods"] == 0
    s.node("n2", cpu="4")
    # queue order: a first, takes 3 pods across both nodes; b stays whole-pending
    assert s.group("a")["placedPods"] == 3 and s.group("b")["placedPods"] == 0


def test_no_head_of_line_blocking_and_priority_order():
    s = Sim()
    s.node("n1", cpu="2")
    s.submit("huge", gang("w", 2, pods(2, cpu="4")), priority=100)
    s.submit("small", basic("b", pods(1, cpu="1")), priority=0)
    assert s.group("small")["placedPods"] == 1


def test_most_allocated_and_name_tie_break():
    s = Sim()
    s.node("b", cpu="4")
    s.node("a", cpu="4")
    s.node("c", cpu="8")
    s.submit("x", basic("g", pods(1, cpu="1")))
    assert s.placements("x") == {"p-0": "a"}  # a, b tie at 1/4 > c's 1/8; a < b
    s.submit("y", basic("g", pods(1, cpu="1")))
    assert s.placements("y") == {"p-0": "a"}  # a now most allocated


def test_exact_score_comparison():
    # a: cpu 1/3 + mem 2/3 = 1; b: cpu 1/2 + mem 1/2 = 1 -> exact tie -> "a" by name
    s = Sim()
    s.node("b", cpu="2", memory="2")
    s.node("a", cpu="3", memory="3")
    s.submit("pre-b", basic("g", pods(1, cpu="0", memory="0")))
    s.submit("x", basic("g", pods(1, cpu="1", memory="1")))
    assert s.placements("x")["p-0"] in ("a", "b")
    s2 = Sim()
    s2.node("b", cpu="2", memory="2")
    s2.node("a", cpu="3", memory="3")
    s2.submit("fill", basic("g", pods(1, name="x", cpu="0", memory="1")))  # lands on b (1/2 > 1/3)
    assert s2.placements("fill") == {"x-0": "b"}


def test_node_selector_and_explanation_message():
    s = Sim()
    for i in range(4):
        s.node(f"n{i}", labels={"pool": "a"}, cpu="1")
    for i in range(6):
        s.node(f"m{i}", labels={"pool": "b"}, cpu="8")
    entry = pods(1, cpu="2")
    entry["nodeSelector"] = {"pool": "a"}
    s.submit("x", basic("g", entry))
    expl = s.group("x")["explanation"]
    assert expl["message"] == ("0/10 nodes are available: 4 Insufficient cpu, "
                               "6 node(s) didn't match Pod's node affinity/selector.")
    assert expl["reasons"] == [
        {"reason": "Insufficient", "resource": "cpu", "nodes": 4, "message": "Insufficient cpu"},
        {"reason": "NodeAffinity", "nodes": 6, "message": "node(s) didn't match Pod's node affinity/selector"}]


def test_too_many_pods_reason():
    s = Sim()
    s.node("n1", pods=1)
    s.submit("a", basic("g", pods(2)))
    assert "1 Too many pods" in s.group("a")["explanation"]["message"]


def test_explanation_recorded_once_not_on_every_pass():
    s = Sim()
    s.node("n1", cpu="1")
    s.submit("big", gang("w", 1, pods(1, cpu="4")))
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]
    s.node("n2", cpu="1")
    s.node("n3", cpu="2")
    assert s.types() == []


def test_topology_domain_by_score_and_tie_by_value():
    s = Sim()
    for rack, n in (("r1", 2), ("r2", 2)):
        for i in range(n):
            s.node(f"{rack}-n{i}", labels={"rack": rack}, cpu="4")
    s.submit("fill", basic("g", pods(1, cpu="1"), topology={"key": "rack"}))
    assert s.group("fill")["domain"] == "r1"  # tie -> smaller value
    s.submit("t", gang("w", 2, pods(2, cpu="2"), topology={"key": "rack"}))
    assert s.group("t")["domain"] == "r1"  # more allocated
    assert set(s.placements("t").values()) <= {"r1-n0", "r1-n1"}
    s.submit("u", gang("w", 3, pods(3, cpu="4"), topology={"key": "rack"}))
    assert s.group("u")["placedPods"] == 0  # no rack holds 3 x 4 cpu
    s.submit("v", gang("w", 2, pods(2, cpu="4"), topology={"key": "rack"}))
    assert set(s.placements("v").values()) == {"r2-n0", "r2-n1"}


def test_topology_later_pods_stay_in_first_domain():
    s = Sim()
    s.node("a1", labels={"rack": "a"}, cpu="2")
    s.node("b1", labels={"rack": "b"}, cpu="1")
    s.submit("t", gang("w", 1, pods(3, cpu="1"), topology={"key": "rack"}))
    assert s.group("t")["domain"] == "a" and s.group("t")["placedPods"] == 2
    s.node("b2", labels={"rack": "b"}, cpu="8")
    assert s.group("t")["placedPods"] == 2  # room only outside its rack
    s.node("a2", labels={"rack": "a"}, cpu="1")
    assert s.placements("t")["p-2"] == "a2"


def test_node_loss_gang_below_min_goes_back_whole():
    s = Sim()
    s.node("n1", cpu="2")
    s.node("n2", cpu="2")
    s.submit("g", gang("w", 4, pods(4, cpu="1")))
    s.remove_node("n2")
    lost = [e.data for e in s.last if e.type == ev.PODS_LOST]
    assert lost[0]["wholeGroup"] is True and len(lost[0]["pods"]) == 4
    assert s.group("g")["placedPods"] == 0
    assert ev.POD_GROUP_UNSCHEDULABLE in s.types()


def test_node_loss_with_surplus_only_lost_pods_pend():
    s = Sim()
    s.node("n1", cpu="2")
    s.node("n2", cpu="2")
    s.submit("g", gang("w", 2, pods(4, cpu="1")))
    s.remove_node("n2")
    lost = [e.data for e in s.last if e.type == ev.PODS_LOST]
    assert lost[0]["wholeGroup"] is False and len(lost[0]["pods"]) == 2
    assert s.group("g")["placedPods"] == 2 and s.group("g")["phase"] == "Scheduled"


def test_cordon_keeps_new_pods_off_and_uncordon_places():
    s = Sim()
    s.node("n1", cpu="2", unschedulable=True)
    s.submit("a", basic("g", pods(1, cpu="1")))
    assert "1 node(s) were unschedulable" in s.group("a")["explanation"]["message"]
    s.node("n1", cpu="2")
    assert s.placements("a") == {"p-0": "n1"}


def test_node_shrink_does_not_evict():
    s = Sim()
    s.node("n1", cpu="4")
    s.submit("a", basic("g", pods(1, cpu="3")))
    s.node("n1", cpu="1")
    assert s.types() == [] and s.placements("a") == {"p-0": "n1"}
    assert s.node_view("n1")["free"]["cpu"] == "-2"
    s.submit("b", basic("g", pods(1, cpu="1")))
    assert s.group("b")["placedPods"] == 0


def test_undeclared_resource_is_insufficient():
    s = Sim()
    s.node("n1", cpu="4")
    entry = {"name": "p", "requests": {"cpu": "1", "example.com/gpu": "1"}}
    s.submit("a", basic("g", entry))
    assert s.group("a")["explanation"]["message"] == "0/1 nodes are available: 1 Insufficient example.com/gpu."


def test_replay_equals_live_state():
    s = Sim()
    s.node("n1", cpu="4")
    s.node("n2", cpu="4", labels={"rack": "x"})
    s.submit("a", gang("w", 2, pods(3, cpu="2")))
    s.submit("b", basic("g", pods(2, cpu="1")), priority=5)
    s.remove_node("n1")
    s.delete("b")
    s.assert_replay_equal()
