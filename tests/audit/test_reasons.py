"""Reasons as codes and numbers, words rendered when read, version-1 decisions upcast (audit.md)."""
from __future__ import annotations

from service.domain.model import events as ev
from service.domain.model import reasons, upcasting
from service.domain.model.rules import RULES
from service.domain.nodes import filters
from tests.domain.sim import Sim, basic, gang, pods


def _words(value: object) -> list[str]:
    """Every string in a decision's data that reads as prose (has a space)."""
    if isinstance(value, dict):
        return [w for v in value.values() for w in _words(v)]
    if isinstance(value, list):
        return [w for v in value for w in _words(v)]
    return [value] if isinstance(value, str) and " " in value else []


def test_every_decision_carries_rules_and_no_words():
    s = Sim()
    s.node("n1", cpu="2", labels={"rack": "r1"})
    s.node("n2", cpu="2", unschedulable=True)
    s.submit("low", gang("g", 2, pods(2, cpu="1")), priority=1)
    s.submit("wait", gang("g", 4, pods(4, cpu="1")))
    s.submit("high", gang("g", 1, pods(1, cpu="2")), priority=10)
    s.remove_node("n1")
    decisions = [e for e in s.events if e.type in ev.DECISION_TYPES]
    assert {e.type for e in decisions} >= {ev.POD_GROUP_SCHEDULED, ev.POD_GROUP_UNSCHEDULABLE, ev.POD_GROUP_PREEMPTED}
    for e in decisions:
        assert e.data["rules"] == RULES
        assert _words(e.data) == [], (e.type, e.data)
    wait = next(e.data["explanation"] for e in decisions if e.type == ev.POD_GROUP_UNSCHEDULABLE)
    assert wait == {"nodes": 2, "reasons": [{"reason": "Insufficient", "resource": "cpu", "nodes": 1},
                                            {"reason": "NodeUnschedulable", "nodes": 1}],
                    "policy": "gang", "pods": 4, "placeablePods": 0, "minCount": 4,
                    "preemption": "NoLowerPriorityVictims"}
    rendered = reasons.render_explanation(wait)
    assert rendered["message"] == ("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable. "
                                   "0/4 pods of the gang fit, minCount 4.")
    assert [r["message"] for r in rendered["reasons"]] == ["Insufficient cpu", "node(s) were unschedulable"]
    preempted = next(e.data for e in decisions if e.type == ev.POD_GROUP_PREEMPTED)
    assert (preempted["reason"], preempted["minCount"]) == (reasons.GANG_AT_MIN_COUNT, 2)


def test_every_filter_reason_has_a_code():
    for words in (filters.UNSCHEDULABLE, filters.AFFINITY, filters.TOPOLOGY, filters.TOO_MANY_PODS,
                  filters.DEVICES, filters.insufficient("example.com/gpu"),
                  "node(s) had untolerated taint {nvidia.com/gpu: present}"):
        code = reasons.node_reason(words)
        assert code["reason"] != reasons.UNRECOGNIZED
        assert reasons.node_words(code) == words  # the words are the code's, both ways


def test_reasons_sort_by_code_then_numbers_and_words_sort_as_strings():
    counts = {"node(s) were unschedulable": 3, "Insufficient memory": 10, "Insufficient cpu": 2,
              "node(s) had untolerated taint {b: 1}": 1}
    entries = reasons.node_reasons(counts)
    assert [(r["reason"], r.get("resource"), r.get("key")) for r in entries] == [
        ("Insufficient", "cpu", None), ("Insufficient", "memory", None),
        ("NodeUnschedulable", None, None), ("UntoleratedTaint", None, "b")]
    expl = {"nodes": 16, "reasons": entries, "policy": "basic", "pods": 1, "placeablePods": 0, "minCount": 1,
            "preemption": None}
    assert reasons.render_explanation(expl)["message"] == (
        "0/16 nodes are available: 1 node(s) had untolerated taint {b: 1}, 10 Insufficient memory, "
        "2 Insufficient cpu, 3 node(s) were unschedulable.")
    assert reasons.fit_error({"nodes": 3, "reasons": []}) == "0/3 nodes are available."


V1_UNSCHEDULABLE = {
    "namespace": "a", "workload": "w", "podGroup": "g",
    "explanation": {"message": "0/16 nodes are available: 16 Insufficient cpu. 3/8 pods of the gang fit, minCount 8.",
                    "reasons": [{"reason": "Insufficient cpu", "nodes": 16},
                                {"reason": "node(s) had untolerated taint {k: v}", "nodes": 2},
                                {"reason": "something new", "nodes": 1}],
                    "placeablePods": 3, "minCount": 8, "preemption": "NoLowerPriorityVictims"}}


def test_a_version_1_decision_is_upcast_keeping_its_words():
    data = upcasting.upcast(ev.POD_GROUP_UNSCHEDULABLE, 1, V1_UNSCHEDULABLE)
    assert data["rules"] == 0
    x = data["explanation"]
    assert x["message"] == V1_UNSCHEDULABLE["explanation"]["message"]
    assert x["reasons"] == [{"reason": "Insufficient", "resource": "cpu", "nodes": 16},
                            {"reason": "UntoleratedTaint", "key": "k", "value": "v", "nodes": 2},
                            {"reason": "Unrecognized", "message": "something new", "nodes": 1}]
    assert "nodes" not in x and "policy" not in x  # fields version 1 lacked stay absent
    assert reasons.render_explanation(x)["message"] == V1_UNSCHEDULABLE["explanation"]["message"]
    assert V1_UNSCHEDULABLE["explanation"]["reasons"][0] == {"reason": "Insufficient cpu", "nodes": 16}  # not mutated


def test_version_1_victims_keep_their_why_as_message():
    why = "whole group: a gang with no pods placed above minCount 2"
    preempted = upcasting.upcast(ev.POD_GROUP_PREEMPTED, 1, {"namespace": "a", "workload": "w", "podGroup": "g",
                                                             "reason": why, "wholeGroup": True, "pods": []})
    assert preempted["message"] == why and "reason" not in preempted and preempted["rules"] == 0
    assert reasons.victim_words(preempted) == why
    placed = upcasting.upcast(ev.POD_GROUP_SCHEDULED, 1, {
        "namespace": "a", "workload": "w", "podGroup": "g", "pods": [], "explanation": None,
        "preemption": {"victims": [{"podGroup": "v", "why": why}], "reprieved": [{"podGroup": "r", "why": "kept"}]}})
    assert placed["preemption"] == {"victims": [{"podGroup": "v", "message": why}],
                                    "reprieved": [{"podGroup": "r", "message": "kept"}]}
    shown = reasons.render_decision(ev.POD_GROUP_SCHEDULED, placed)
    assert shown["preemption"]["reprieved"][0]["message"] == "kept"


def test_views_render_the_stored_codes():
    s = Sim()
    s.node("n1", cpu="1")
    s.submit("w", basic("g", pods(2, cpu="1")))
    stored = s.events[-1].data["explanation"]
    assert "message" not in stored
    view = s.group("w")["explanation"]
    assert view["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert view["reasons"] == [{"reason": "Insufficient", "resource": "cpu", "nodes": 1, "message": "Insufficient cpu"}]
