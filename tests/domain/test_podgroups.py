"""lifecycle.md *PodGroup objects* (KEP-5832), one example per rule: workloads of templates, PodGroup
objects created from them, each scheduled as its own unit (queue, topology, preemption, loss),
claims shared through the workload, reports and scale through the workload, deletion, refusals."""
from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from service.domain.decide.podgroups import podgroup_of
from service.domain.model import events as ev
from service.domain.read.views import canonical, podgroup_view
from service.schemas import validate_body
from tests.domain.sim import Sim, basic, gang, pods
from tests.domain.test_scale import assert_consistent

TEMPLATE = {"name": "worker", "schedulingPolicy": {"gang": {"minCount": 2}},
            "pods": [{"name": "worker", "count": 2, "requests": {"cpu": "1"}}]}


def templates(s: Sim, name: str = "train", *tpls: dict[str, Any], **extra: Any) -> list[ev.Event]:
    body = {"name": name, "podGroupTemplates": list(tpls) or [TEMPLATE], **extra}
    validate_body("Workload", json.dumps(body))
    return s.run("SubmitWorkload", name, "default", body)


def create(s: Sim, name: str, workload: str = "train", template: str | None = "worker", **fields: Any) -> list[ev.Event]:
    ref: dict[str, Any] = {"workloadName": workload}
    if template is not None:
        ref["templateName"] = template
    body = {"name": name, "workloadRef": ref, **fields}
    validate_body("PodGroupObject", json.dumps(body))
    return s.run("CreatePodGroup", name, "default", body)


def view(s: Sim, name: str) -> dict[str, Any]:
    pg = podgroup_of(s.state, "default", name)
    assert pg is not None
    return podgroup_view(s.state, pg)


def assert_all(s: Sim) -> None:
    assert_consistent(s.state)
    s.assert_replay_equal()
    assert canonical(pickle.loads(pickle.dumps(s.state))) == canonical(s.state)


def test_a_workload_of_templates_holds_no_pods_until_its_podgroups_come():
    s = Sim()
    s.node("n1", cpu="8")
    assert templates(s) == []
    wl = s.wl("train")
    assert wl["status"]["phase"] == "Pending" and wl["status"]["podGroups"] == []
    decisions = create(s, "train-0")
    inp = s.events[-1 - len(decisions)]
    assert inp.type == ev.POD_GROUP_CREATED
    assert inp.data == {"namespace": "default", "workload": "train", "name": "train-0", "template": "worker",
                        "priority": 0, "preemptionPolicy": "PreemptLowerPriority",
                        "spec": {"name": "train-0", "schedulingPolicy": {"gang": {"minCount": 2}},
                                 "disruptionMode": "Single", "resourceClaims": [],
                                 "pods": [{"name": "worker", "count": 2, "requests": {"cpu": "1"}}]}}
    assert s.types(decisions) == [ev.POD_GROUP_SCHEDULED]
    assert decisions[0].data["workload"] == "train" and decisions[0].data["podGroup"] == "train-0"
    v = view(s, "train-0")
    assert (v["workload"], v["template"], v["position"], v["priority"]) == ("train", "worker", inp.position, 0)
    assert v["status"]["phase"] == "Scheduled" and v["status"]["placedPods"] == 2 and v["status"]["minCount"] == 2
    assert [p["name"] for p in v["status"]["pods"]] == ["worker-0", "worker-1"]
    wl = s.wl("train")
    assert [g["name"] for g in wl["status"]["podGroups"]] == ["train-0"] and wl["status"]["phase"] == "Scheduled"
    assert wl["status"]["podGroups"][0]["parent"] is None
    assert_all(s)


def test_the_body_s_fields_win_and_without_a_template_the_policy_and_pods_are_required():
    s = Sim()
    s.node("n1", cpu="8")
    templates(s)
    create(s, "eval", template=None, priority=10, schedulingPolicy={"basic": {}},
           pods=[{"name": "eval", "requests": {"cpu": "2"}}])
    v = view(s, "eval")
    assert v["template"] is None and v["priority"] == 10
    assert v["spec"]["schedulingPolicy"] == {"basic": {}} and v["status"]["placedPods"] == 1
    create(s, "big", pods=[{"name": "w", "count": 3, "requests": {"cpu": "1"}}])
    assert view(s, "big")["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    assert view(s, "big")["status"]["placedPods"] == 3
    assert_all(s)


def test_at_equal_priority_the_podgroup_created_earlier_goes_first_whatever_its_workload():
    s = Sim()
    s.node("n1", cpu="2")
    s.submit("hog", gang("g", 1, pods(1, cpu="2")))
    templates(s, "a")
    templates(s, "b")
    create(s, "b-0", workload="b")  # waits
    create(s, "a-0", workload="a")  # waits, created later although its workload came first
    assert view(s, "b-0")["status"]["phase"] == "Pending" and view(s, "a-0")["status"]["phase"] == "Pending"
    decisions = s.delete("hog")
    assert [(d.type, d.data["podGroup"]) for d in decisions] == [(ev.POD_GROUP_SCHEDULED, "b-0")]
    assert_all(s)


def test_each_podgroup_has_a_topology_domain_of_its_own():
    s = Sim()
    s.node("n1", cpu="2", labels={"rack": "r1"})
    s.node("n2", cpu="2", labels={"rack": "r2"})
    templates(s, "train", {**TEMPLATE, "topology": {"key": "rack"}})
    create(s, "train-0")
    create(s, "train-1")
    assert {view(s, "train-0")["status"]["domain"], view(s, "train-1")["status"]["domain"]} == {"r1", "r2"}
    assert_all(s)


def test_creation_tries_the_podgroup_alone():
    s = Sim()
    s.node("n1", cpu="2")
    s.submit("hog", gang("g", 1, pods(1, cpu="2")))
    s.submit("waiting", basic("g", pods(1, cpu="1")))
    s.run("UpsertNode", "n2", body={"allocatable": {"cpu": "1"}, "labels": {}, "unschedulable": True})
    templates(s)
    decisions = create(s, "train-0")
    assert {d.data.get("podGroup") for d in decisions} == {"train-0"}
    assert_all(s)


def _devices(s: Sim) -> dict[str, Any]:
    s.run("UpsertDeviceClass", "nic", body={"selectors": []})
    for n in ("n1", "n2"):
        s.run("UpsertResourceSlice", f"{n}-nics", body={"driver": "nic.example.com", "pool": {"name": n},
                                                       "nodeName": n, "devices": [{"name": f"d{i}"} for i in range(4)]})
    return {"name": "nic", "spec": {"devices": {"requests": [{"name": "n", "exactly": {"deviceClassName": "nic"}}]}}}


def test_claims_a_podgroup_s_own_and_the_workload_s_shared_once():
    s = Sim()
    s.node("n1", cpu="8")
    tpl = _devices(s)
    own = [{"name": "nic", "resourceClaimTemplateName": "nic"}]
    shared = [{"name": "dataset", "resourceClaimTemplateName": "nic"}]
    template = {**TEMPLATE, "resourceClaims": own,
                "pods": [{"name": "worker", "count": 2, "requests": {"cpu": "1"}, "resourceClaims": own + shared}]}
    templates(s, "train", template, resourceClaims=shared,
              resourceClaimTemplates=[tpl])
    create(s, "train-0")
    create(s, "train-1")
    claims = s.state.dra.claims
    kinds = sorted(k[0] for k in claims)
    assert kinds == ["PodGroup", "PodGroup", "Workload"]  # one per PodGroup, one for the workload
    workload_claim = next(a for k, a in claims.items() if k[0] == "Workload")
    s.run("DeletePodGroup", "train-0", "default")
    assert any(k[0] == "Workload" for k in s.state.dra.claims)  # train-1 still runs
    assert s.state.dra.claims[workload_claim.claim] == workload_claim
    s.run("DeletePodGroup", "train-1", "default")
    assert s.state.dra.claims == {}
    assert_all(s)


def test_reports_and_scale_go_through_the_workload():
    s = Sim()
    s.node("n1", cpu="8")
    templates(s)
    create(s, "train-0")
    s.finish("train", ("train-0", "worker-0", "Succeeded"))
    assert view(s, "train-0")["status"]["succeededPods"] == 1
    decisions = s.scale("train", {"podGroups": [{"name": "train-0", "schedulingPolicy": {"gang": {"minCount": 3}},
                                                 "pods": [{"name": "worker", "count": 3}]}]})
    assert s.types(decisions) == [ev.POD_GROUP_SCHEDULED]
    v = view(s, "train-0")
    assert (v["status"]["placedPods"], v["status"]["succeededPods"], v["status"]["minCount"]) == (2, 1, 3)
    assert v["spec"]["pods"][0]["count"] == 3
    assert_all(s)


def test_deleting_a_podgroup_releases_it_and_sweeps_the_queue():
    s = Sim()
    s.node("n1", cpu="2")
    templates(s)
    create(s, "train-0")
    create(s, "train-1")
    assert view(s, "train-1")["status"]["phase"] == "Pending"
    decisions = s.run("DeletePodGroup", "train-0", "default")
    assert s.events[-1 - len(decisions)].data == {"namespace": "default", "workload": "train", "name": "train-0"}
    assert [(d.type, d.data["podGroup"]) for d in decisions] == [(ev.POD_GROUP_SCHEDULED, "train-1")]
    v = view(s, "train-0")
    assert v["status"]["phase"] == "Finished" and v["status"]["deletedAt"] is not None
    assert all(p["phase"] == "Pending" and p["node"] is None for p in v["status"]["pods"])
    assert [g["name"] for g in s.wl("train")["status"]["podGroups"]] == ["train-1"]
    assert s.refused("DeletePodGroup", "train-0", "default").status == 404
    assert s.refused("DeletePodGroup", "nope", "default").status == 404
    history = s.state.workloads[("default", "train")].events
    assert s.events[-1 - len(decisions)].position in history
    assert_all(s)


def test_deleting_the_workload_releases_every_podgroup():
    s = Sim()
    s.node("n1", cpu="8")
    templates(s)
    create(s, "train-0")
    create(s, "train-1")
    s.delete("train")
    assert view(s, "train-0")["status"]["phase"] == "Finished" and view(s, "train-1")["status"]["phase"] == "Finished"
    assert s.node_view("n1")["pods"] == []
    r = s.refused("CreatePodGroup", "train-2", "default", {"name": "train-2", "workloadRef": {
        "workloadName": "train", "templateName": "worker"}})
    assert (r.status, r.reason) == (409, "WorkloadDeleted")
    assert_all(s)


def test_podgroups_preempt_and_are_preempted_at_their_own_priority():
    s = Sim()
    s.node("n1", cpu="2")
    templates(s)
    create(s, "low", priority=1)
    decisions = create(s, "high", priority=5)
    # the pass sweeps again after the eviction: low waits, explained
    assert [d.type for d in decisions] == [ev.POD_GROUP_PREEMPTED, ev.POD_GROUP_SCHEDULED, ev.POD_GROUP_UNSCHEDULABLE]
    assert decisions[0].data["podGroup"] == "low" and decisions[0].data["preemptor"]["podGroup"] == "high"
    assert view(s, "low")["status"]["phase"] == "Pending"
    s.remove_node("n1")
    assert view(s, "high")["status"]["phase"] == "Pending"
    assert_all(s)


def test_create_refusals_record_nothing():
    s = Sim()
    s.node("n1", cpu="8")
    templates(s, "train", TEMPLATE, {"name": "bare", "schedulingPolicy": {"gang": {"minCount": 3}}})
    s.submit("flat", gang("g", 1, pods(1, cpu="1")))
    create(s, "train-0")

    def refused(body: dict[str, Any]) -> Any:
        validate_body("PodGroupObject", json.dumps(body))
        return s.refused("CreatePodGroup", body["name"], "default", body)

    r = refused({"name": "x", "workloadRef": {"workloadName": "nope", "templateName": "worker"}})
    assert (r.status, r.loc) == (422, ("body", "workloadRef", "workloadName"))
    r = refused({"name": "x", "workloadRef": {"workloadName": "train", "templateName": "nope"}})
    assert (r.status, r.loc) == (422, ("body", "workloadRef", "templateName"))
    r = refused({"name": "x", "workloadRef": {"workloadName": "flat", "templateName": "g"}})
    assert (r.status, r.reason) == (409, "WorkloadHasPodGroups")
    r = refused({"name": "train-0", "workloadRef": {"workloadName": "train", "templateName": "worker"}})
    assert r.status == 409
    r = refused({"name": "x", "workloadRef": {"workloadName": "train", "templateName": "bare"}})
    assert (r.status, r.loc) == (422, ("body", "pods"))
    r = refused({"name": "x", "workloadRef": {"workloadName": "train", "templateName": "bare"},
                 "pods": [{"name": "p", "count": 2}]})
    assert (r.status, r.loc) == (422, ("body", "pods"))  # minCount 3 (the template's) > 2 pods
    r = refused({"name": "x", "workloadRef": {"workloadName": "train", "templateName": "worker"},
                 "resourceClaims": [{"name": "c", "resourceClaimTemplateName": "none"}]})
    assert (r.status, r.loc) == (422, ("body", "resourceClaims", 0, "resourceClaimTemplateName"))
    r = refused({"name": "x", "workloadRef": {"workloadName": "train", "templateName": "worker"},
                 "pods": [{"name": "p", "count": 9999}]})
    assert (r.status, r.loc) == (422, ("body", "pods"))  # 2 + 9999 live pods
    r = refused({"name": "x", "workloadRef": {"workloadName": "train"}, "priorityClassName": "nope",
                 "schedulingPolicy": {"basic": {}}, "pods": [{"name": "p"}]})
    assert (r.status, r.loc) == (422, ("body", "priorityClassName"))
    s.run("DeletePodGroup", "train-0", "default")
    r = refused({"name": "train-0", "workloadRef": {"workloadName": "train", "templateName": "worker"}})
    assert r.status == 409 and "deleted at position" in r.detail


@pytest.mark.parametrize(("body", "loc"), [
    ({"name": "x", "workloadRef": {"workloadName": "t"}}, ["body", "schedulingPolicy"]),
    ({"name": "x", "workloadRef": {"workloadName": "t", "templateName": "w"}, "parentCompositePodGroupName": "c"},
     ["body", "parentCompositePodGroupName"]),
    ({"name": "x", "workloadRef": {"templateName": "w"}}, ["body", "workloadRef", "workloadName"]),
    ({"name": "X", "workloadRef": {"workloadName": "t", "templateName": "w"}}, ["body", "name"]),
    ({"name": "x", "workloadRef": {"workloadName": "t", "templateName": "w"}, "pods": []}, ["body", "pods"]),
    ({"name": "x", "workloadRef": {"workloadName": "t", "templateName": "w"}, "priority": 1,
      "priorityClassName": "p"}, ["body", "priorityClassName"]),
    ({"name": "x", "workloadRef": {"workloadName": "t", "templateName": "w"}, "schedulingPolicy": {
        "gang": {"minCount": 3}}, "pods": [{"name": "p", "count": 2}]}, ["body", "schedulingPolicy", "gang", "minCount"]),
])
def test_a_bad_podgroup_body_names_the_field(body, loc):
    from service.schemas.errors import InputValidationError
    with pytest.raises(InputValidationError) as bad:
        validate_body("PodGroupObject", json.dumps(body))
    assert loc in [e["loc"] for e in bad.value.errors], bad.value.errors


@pytest.mark.parametrize(("body", "loc"), [
    ({"name": "t", "podGroupTemplates": [TEMPLATE], "podGroups": [gang("g", 1, pods(1))]}, ["body", "podGroupTemplates"]),
    ({"name": "t", "podGroupTemplates": [TEMPLATE, TEMPLATE]}, ["body", "podGroupTemplates", 1, "name"]),
    ({"name": "t", "podGroupTemplates": [TEMPLATE] * 9}, ["body", "podGroupTemplates"]),
    ({"name": "t", "podGroupTemplates": [{**TEMPLATE, "resourceClaims": [
        {"name": "c", "resourceClaimTemplateName": "none"}]}]},
     ["body", "podGroupTemplates", 0, "resourceClaims", 0, "resourceClaimTemplateName"]),
])
def test_a_bad_workload_of_templates_names_the_field(body, loc):
    from service.schemas.errors import InputValidationError
    with pytest.raises(InputValidationError) as bad:
        validate_body("Workload", json.dumps(body))
    assert loc in [e["loc"] for e in bad.value.errors], bad.value.errors


def test_no_templates_is_a_workload_too():
    validate_body("Workload", json.dumps({"name": "t", "podGroupTemplates": []}))


def test_what_if_skips_a_withdrawn_workload_s_reports_scales_and_podgroups():
    from service.domain.model.rules import RULES
    from service.domain.read.whatif import Changes, what_if
    s = Sim()
    s.node("n1", cpu="4")
    templates(s)
    create(s, "train-0")
    s.submit("pi", gang("job", 2, pods(2, "pi", cpu="1")))
    s.finish("pi", ("job", "pi-0", "Succeeded"))
    s.scale("pi", {"podGroups": [{"name": "job", "pods": [{"name": "pi", "count": 3}]}]})
    create(s, "train-1")
    s.run("DeletePodGroup", "train-0", "default")
    inputs = {e.type for e in s.events if e.is_input}
    assert {ev.PODS_FINISHED, ev.WORKLOAD_SCALED, ev.POD_GROUP_CREATED, ev.POD_GROUP_DELETED} <= inputs
    report = what_if("c1", s.events, Changes(withdraw=[("default", "train", None), ("default", "pi", None)]), RULES)
    # the two submissions, the report, the scale, two creations and the deletion are skipped
    assert report["inputs"]["skipped"] == 7, report["inputs"]
    kept = what_if("c1", s.events, Changes(withdraw=[("default", "pi", None)]), RULES)
    assert kept["inputs"]["skipped"] == 3  # pi's submission, report and scale; the PodGroups decide again


def test_a_light_snapshot_keeps_workloads_of_templates_and_their_podgroups():
    from service.app.snapshots import light_copy
    from service.domain import evolve
    from service.domain.model.events import Event
    s = Sim()
    s.node("n1", cpu="8")
    templates(s, "idle")  # no PodGroup yet: neither queued nor running
    templates(s)
    create(s, "train-0")
    cut = len(s.events)
    create(s, "idle-0", workload="idle")
    s.scale("train", {"podGroups": [{"name": "train-0", "pods": [{"name": "worker", "count": 3}]}]})
    s.delete("train")
    full = s.replayed()
    lite = state_from(s.events[:cut])
    lite = light_copy(lite)
    for e in s.events[cut:]:
        evolve(lite, Event(e.position, e.type, json.loads(json.dumps(e.data))))
    assert canonical(lite)["podgroups"] == canonical(full)["podgroups"]
    assert [w for w in canonical(lite)["workloads"] if w["name"] in ("idle", "train")] == \
        [w for w in canonical(full)["workloads"] if w["name"] in ("idle", "train")]


def state_from(events: list[ev.Event]) -> Any:
    from service.domain import ClusterState, evolve
    from service.domain.model.events import Event
    state = ClusterState("c1")
    for e in events:
        evolve(state, Event(e.position, e.type, json.loads(json.dumps(e.data))))
    return state
