"""lifecycle.md, one example per rule: finished pods, the gang counting Succeeded pods (Kubernetes
issue 142330), phases, conditions and counts in the views."""
from service.domain.model import events as ev
from tests.domain.sim import Sim, basic, gang, pods
from tests.domain.test_composite import cpg, cpg_view, submit_tree


def _pi(nodes: int = 1, cpu: str = "4") -> Sim:
    s = Sim()
    for i in range(nodes):
        s.node(f"n{i + 1}", cpu=cpu)
    s.submit("pi", gang("job", 4, pods(4, "pi", cpu="1")))
    assert s.types() == [ev.POD_GROUP_SCHEDULED]
    return s


def _pod(s: Sim, wl: str, name: str, group: str | None = None) -> dict:
    return next(p for p in s.group(wl, group)["pods"] if p["name"] == name)


def test_a_finished_pod_leaves_its_node_and_keeps_its_phase():
    s = _pi()
    decisions = s.finish("pi", ("job", "pi-0", "Succeeded"))
    inp = s.events[-1 - len(decisions)]
    assert inp.type == ev.PODS_FINISHED
    assert inp.data == {"namespace": "default", "workload": "pi",
                        "pods": [{"podGroup": "job", "pod": "pi-0", "phase": "Succeeded", "node": "n1"}]}
    assert _pod(s, "pi", "pi-0") == {"name": "pi-0", "phase": "Succeeded", "node": None}
    assert _pod(s, "pi", "pi-1") == {"name": "pi-1", "phase": "Running", "node": "n1"}
    g = s.group("pi")
    assert (g["placedPods"], g["pendingPods"], g["succeededPods"], g["failedPods"]) == (3, 0, 1, 0)
    assert g["phase"] == "Scheduled"
    assert s.node_view("n1")["allocated"]["cpu"] == "3"
    assert [p["pod"] for p in s.node_view("n1")["pods"]] == ["pi-1", "pi-2", "pi-3"]
    s.assert_replay_equal()


def test_issue_142330_a_failed_member_leaves_the_gang_unsatisfied_but_running():
    s = _pi()
    s.finish("pi", ("job", "pi-0", "Succeeded"))
    assert s.group("pi")["phase"] == "Scheduled"
    assert s.finish("pi", ("job", "pi-1", "Failed")) == []  # nothing else moves
    g = s.group("pi")
    assert g["phase"] == "Pending" and (g["placedPods"], g["succeededPods"], g["failedPods"]) == (2, 1, 1)
    assert _pod(s, "pi", "pi-2")["phase"] == "Running" and _pod(s, "pi", "pi-3")["node"] == "n1"
    cond = next(c for c in g["conditions"] if c["type"] == "PodGroupSatisfied")
    assert cond["status"] == "False" and cond["reason"] == "MinCountNotMet"
    assert cond["message"] == "2 running, 1 succeeded, minCount 4"
    assert cond["position"] == s.events[-1].position
    s.assert_replay_equal()


def test_finished_pods_count_for_the_gang_until_every_pod_finished():
    s = _pi()
    s.finish("pi", ("job", "pi-0", "Succeeded"), ("job", "pi-1", "Succeeded"))
    g = s.group("pi")
    cond = next(c for c in g["conditions"] if c["type"] == "PodGroupSatisfied")
    assert cond["status"] == "True" and cond["reason"] == "MinCountMet"
    assert cond["message"] == "2 running, 2 succeeded, minCount 4"
    s.finish("pi", ("job", "pi-2", "Succeeded"), ("job", "pi-3", "Succeeded"))
    assert s.group("pi")["phase"] == "Completed"
    assert s.wl("pi")["status"]["phase"] == "Completed"
    s.delete("pi")
    assert [p["phase"] for p in s.group("pi")["pods"]] == ["Succeeded"] * 4
    assert s.wl("pi")["status"]["phase"] == "Finished"
    s.assert_replay_equal()


def test_after_deletion_unfinished_pods_show_pending_and_finished_keep_their_phase():
    s = _pi()
    s.finish("pi", ("job", "pi-0", "Failed"))
    s.delete("pi")
    assert [p["phase"] for p in s.group("pi")["pods"]] == ["Failed", "Pending", "Pending", "Pending"]
    assert all(p["node"] is None for p in s.group("pi")["pods"])
    s.assert_replay_equal()


def test_a_report_adds_room_and_sweeps_the_queue():
    s = _pi()
    s.submit("next", gang("w", 2, pods(2, cpu="1")))
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]
    s.finish("pi", ("job", "pi-0", "Succeeded"))
    assert s.types() == []  # one cpu is not two
    s.finish("pi", ("job", "pi-1", "Failed"))
    assert s.types() == [ev.POD_GROUP_SCHEDULED]
    assert s.group("next")["placedPods"] == 2
    s.assert_replay_equal()


def test_a_satisfied_gangs_pending_pods_are_leftovers():
    s = Sim()
    s.node("n1", cpu="3")
    s.submit("pi", gang("job", 2, pods(4, "pi", cpu="1")))
    assert s.group("pi")["placedPods"] == 3
    s.finish("pi", ("job", "pi-0", "Succeeded"))
    assert s.types() == [ev.PODS_SCHEDULED]  # the leftover pi-3 takes the room
    assert _pod(s, "pi", "pi-3")["node"] == "n1"
    s.assert_replay_equal()


def test_basic_group_with_a_succeeded_pod_is_satisfied():
    s = Sim()
    s.node("n1", cpu="1")
    s.submit("b", basic("web", pods(2, "w", cpu="1")))
    s.finish("b", ("web", "w-0", "Succeeded"))
    assert s.types() == [ev.PODS_SCHEDULED]  # w-1: a leftover of a satisfied group
    assert s.group("b")["phase"] == "Scheduled"
    s.assert_replay_equal()


def test_finished_pods_are_never_victims_and_count_for_the_surplus():
    s = _pi()
    s.finish("pi", ("job", "pi-0", "Succeeded"), ("job", "pi-1", "Succeeded"),
             ("job", "pi-2", "Succeeded"), ("job", "pi-3", "Succeeded"))
    s2 = Sim()
    s2.node("n1", cpu="4")
    s2.submit("low", gang("job", 2, pods(3, "p", cpu="1")))
    s2.finish("low", ("job", "p-0", "Succeeded"))  # 2 running + 1 succeeded: surplus 1
    s2.submit("high", basic("b", pods(1, "h", cpu="3")), priority=10)
    pre = [e for e in s2.last if e.type == ev.POD_GROUP_PREEMPTED]
    assert len(pre) == 1 and [p["pod"] for p in pre[0].data["pods"]] == ["p-2"]
    assert pre[0].data["wholeGroup"] is False
    g = s2.group("low")
    assert g["phase"] == "Scheduled" and (g["placedPods"], g["succeededPods"]) == (1, 1)
    s2.assert_replay_equal()


def test_a_gang_without_surplus_goes_whole_and_only_its_running_pods():
    s = Sim()
    s.node("n1", cpu="4")
    s.submit("low", gang("job", 3, pods(3, "p", cpu="1")))
    s.finish("low", ("job", "p-0", "Succeeded"))  # 2 + 1 = minCount: no surplus
    s.submit("high", basic("b", pods(1, "h", cpu="3")), priority=10)
    pre = [e for e in s.last if e.type == ev.POD_GROUP_PREEMPTED]
    assert [p["pod"] for p in pre[0].data["pods"]] == ["p-1", "p-2"] and pre[0].data["wholeGroup"] is True
    assert _pod(s, "low", "p-0")["phase"] == "Succeeded"
    s.assert_replay_equal()


def test_node_loss_never_loses_a_finished_pod_and_counts_succeeded():
    s = Sim()
    s.node("n1", cpu="2")
    s.node("n2", cpu="2")
    s.submit("low", gang("job", 4, pods(4, "p", cpu="1")))
    placed = s.placements("low")
    first = [p for p, n in placed.items() if n == "n1"]
    s.finish("low", (("job", first[0], "Succeeded")))
    lost = s.remove_node("n1")
    pl = [e for e in lost if e.type == ev.PODS_LOST]
    # 2 running left + 1 succeeded < 4: every Running pod goes back, the Succeeded one stays
    assert pl and pl[0].data["wholeGroup"] is True
    assert _pod(s, "low", first[0])["phase"] == "Succeeded"
    assert s.group("low")["placedPods"] == 0 and s.group("low")["succeededPods"] == 1
    s.assert_replay_equal()


def test_refusals_record_nothing():
    s = _pi()
    s.submit("wait", gang("w", 2, pods(2, cpu="4")))
    r = s.refused("FinishPods", "nope", "default", {"pods": [{"podGroup": "job", "name": "pi-0", "phase": "Succeeded"}]})
    assert r.status == 404
    r = s.refused("FinishPods", "pi", "default", {"pods": [{"podGroup": "x", "name": "pi-0", "phase": "Succeeded"}]})
    assert (r.status, r.loc) == (422, ("body", "pods", 0, "podGroup"))
    r = s.refused("FinishPods", "pi", "default", {"pods": [{"podGroup": "job", "name": "pi-9", "phase": "Failed"}]})
    assert (r.status, r.loc) == (422, ("body", "pods", 0, "name"))
    r = s.refused("FinishPods", "wait", "default", {"pods": [{"podGroup": "w", "name": "p-0", "phase": "Failed"}]})
    assert r.status == 409 and "Pending" in r.detail
    s.finish("pi", ("job", "pi-0", "Failed"))
    r = s.refused("FinishPods", "pi", "default", {"pods": [{"podGroup": "job", "name": "pi-1", "phase": "Failed"},
                                                          {"podGroup": "job", "name": "pi-0", "phase": "Failed"}]})
    assert r.status == 409 and "pi-0" in r.detail and "Failed" in r.detail and r.loc == ("body", "pods", 1, "name")
    s.delete("pi")
    r = s.refused("FinishPods", "pi", "default", {"pods": [{"podGroup": "job", "name": "pi-1", "phase": "Failed"}]})
    assert r.status == 409


def test_a_failed_report_keeps_a_trees_pinned_domain_and_its_leftovers_stay_inside_it():
    """lifecycle.md *Trees*: a report that leaves a CPG unsatisfied with pods of its subtree
    running keeps its pods and its pinned domain; its unsatisfied children are leftovers."""
    s = Sim()
    s.node("n1", labels={"block": "b0"}, cpu="4")
    rep = cpg("rep", [gang("w", 1, pods(1, cpu="16"))])  # fits no node yet
    submit_tree(s, "t", cpg("root", [gang("g", 2, pods(2, cpu="1"))], [rep], topo="block"))
    assert cpg_view(s, "t", "root")["domain"] == {"key": "block", "value": "b0"}
    assert s.placements("t", "g") == {"p-0": "n1", "p-1": "n1"}
    s.finish("t", ("g", "p-0", "Failed"))
    assert s.placements("t", "g") == {"p-0": None, "p-1": "n1"}
    assert cpg_view(s, "t", "root")["domain"] == {"key": "block", "value": "b0"}
    s.node("n2", labels={"block": "b1"}, cpu="32")  # room for rep, outside the pinned block
    assert s.placements("t", "w") == {"p-0": None}
    assert ev.COMPOSITE_POD_GROUP_SCHEDULED not in s.types()
    s.node("n3", labels={"block": "b0"}, cpu="32")  # room inside it: rep is a leftover placed there
    assert s.placements("t", "w") == {"p-0": "n3"}
    assert cpg_view(s, "t", "root")["domain"] == {"key": "block", "value": "b0"}
    assert cpg_view(s, "t", "root")["phase"] == "Scheduled"
    s.assert_replay_equal()
