"""What-if under a scoring strategy and its changes' errors (audit.md, *What-if*; sharing.md, *The
scheduler configuration*): the changes' strategy replaces the configuration in force at `from`, goes
through the decider's one strategy seam (FragmentationAware places as a recorded FragmentationAware
cluster does), is validated as `PUT /scheduler` validates it, a node `add` names a node as `PUT /nodes`
does, and a stream the what-if cannot re-decide is an error naming its position, never a crash."""
from __future__ import annotations

from typing import Any

import pytest

from service.domain import Event
from service.domain.read.whatif import WhatIfInvalid, WhatIfUnfoldable, what_if
from service.schemas.errors import InputValidationError
from service.schemas.whatif import parse_changes
from tests.domain.sim import Sim, basic, pods
from tests.domain.test_devices import device_class
from tests.domain.test_fragmentation import configure, fa, share
from tests.domain.test_sharing import gpu_node, sgpu, submit_share


def _report(events: list[Event], doc: dict[str, Any]) -> dict[str, Any]:
    return what_if("c", events, parse_changes(doc), 3)


def _row(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(w for w in doc["workloads"] if w["name"] == name)


def _least_allocated_first() -> Sim:
    """LeastAllocated recorded at 1; a (2 pods × 1 cpu) spreads over n1 and n2; b (4 cpu) stays Pending."""
    s = Sim("c")
    configure(s, {"type": "LeastAllocated"})
    s.node("n1", cpu="4")
    s.node("n2", cpu="4")
    s.submit("a", basic("g", pods(2, cpu="1")))
    s.submit("b", basic("g", pods(1, cpu="4")))
    assert s.group("b")["phase"] == "Pending"
    return s


def test_the_changes_strategy_replaces_a_configuration_recorded_before_from() -> None:
    s = _least_allocated_first()
    for start in (0, 1):
        doc = _report(s.events, {"from": start, "scoring": {"strategy": "MostAllocated"}})
        assert _row(doc, "b")["recorded"]["phase"] == "Pending"
        assert _row(doc, "b")["whatIf"]["phase"] == "Scheduled", start  # a packs n1: b fits on n2
        assert doc["inputs"]["skipped"] == (1 if start == 0 else 0)  # the recorded SchedulerConfigured
    unchanged = _report(s.events, {"from": 1})
    assert _row(unchanged, "b")["whatIf"]["phase"] == "Pending"  # without scoring: the recorded one holds


def _shares(recorded: dict[str, Any] | None) -> Sim:
    """Two nodes with one shareable GPU each; a (300) on n1, then b (300), c (600) and d (600). Under
    MostAllocated b joins a on n1 and d finds no 600 left; FragmentationAware with a target of 600
    shares puts b on n2 (n1's 700 would fall to 400, of no use to a 600 share) and d fits."""
    s = Sim("c")
    device_class(s)
    if recorded is not None:
        configure(s, recorded)
    gpu_node(s, "n1", [sgpu("gpu-0")], cpu="8")
    gpu_node(s, "n2", [sgpu("gpu-0")], cpu="8")
    for name, milli in (("a", "300"), ("b", "300"), ("c", "600"), ("d", "600")):
        submit_share(s, name, milli)
    return s


def test_a_what_if_with_fragmentation_aware_places_with_fragmentation_aware() -> None:
    strategy = fa([share("600")])
    recorded_fa = _shares(strategy)
    assert recorded_fa.group("d")["phase"] == "Scheduled"
    most = _shares({"type": "MostAllocated"})
    assert most.group("d")["phase"] == "Pending"
    doc = _report(most.events, {"scoring": {"strategy": "FragmentationAware",
                                            "fragmentationAware": strategy["fragmentationAware"]}})
    truth = {w["name"]: w["recorded"] for w in _report(recorded_fa.events, {})["workloads"]}
    assert {w["name"]: w["whatIf"] for w in doc["workloads"]} == truth
    assert doc["inputs"]["skipped"] == 1  # most's SchedulerConfigured, replaced for the whole range


def test_a_what_if_with_least_allocated_ranks_nodes_for_pods_with_devices_too() -> None:
    most = _shares({"type": "MostAllocated"})
    doc = _report(most.events, {"scoring": {"strategy": "LeastAllocated"}})
    recorded_la = {w["name"]: w["recorded"] for w in _report(_shares({"type": "LeastAllocated"}).events,
                                                              {})["workloads"]}
    assert {w["name"]: w["whatIf"] for w in doc["workloads"]} == recorded_la
    assert _row(doc, "b")["whatIf"]["phase"] == "Scheduled" and _row(doc, "d")["whatIf"]["phase"] == "Scheduled"


@pytest.mark.parametrize(("scoring", "named"), [
    ({"strategy": "FragmentationAware", "fragmentationAware": 42}, ["scoring", "fragmentationAware"]),
    ({"strategy": "FragmentationAware", "fragmentationAware": {}}, ["scoring", "fragmentationAware",
                                                                    "deviceClassName"]),
    ({"strategy": "FragmentationAware", "fragmentationAware": {**fa([share("600")])["fragmentationAware"],
                                                               "tolerance": -1}},
     ["scoring", "fragmentationAware", "tolerance"]),
    ({"strategy": "FragmentationAware", "fragmentationAware": {**fa([share("600")])["fragmentationAware"],
                                                               "targetWorkload": {}}},
     ["scoring", "fragmentationAware", "targetWorkload"]),
])
def test_fragmentation_aware_changes_are_validated_as_the_scheduler_configuration(
        scoring: dict[str, Any], named: list[Any]) -> None:
    with pytest.raises(InputValidationError) as caught:
        parse_changes({"scoring": scoring})
    assert named in [e["loc"] for e in caught.value.errors], caught.value.errors


@pytest.mark.parametrize("name", ["Bad_N", "UPPER", "-lead", "a" * 254, "with space"])
def test_a_node_entry_names_a_node_as_put_nodes_does(name: str) -> None:
    for kind, extra in (("add", {"node": {"allocatable": {"cpu": "1"}}}), ("remove", {}), ("cordon", {})):
        with pytest.raises(InputValidationError) as caught:
            parse_changes({"nodes": [{"at": 0, kind: name, **extra}]})
        assert [e["loc"] for e in caught.value.errors] == [["nodes", 0, kind]], (kind, caught.value.errors)
    parse_changes({"nodes": [{"at": 0, "add": "n-1.rack-2", "node": {"allocatable": {"cpu": "1"}}}]})


# -- streams the what-if world cannot follow -------------------------------------------------------
def _finished() -> Sim:
    s = Sim("c")
    s.node("n1", cpu="4")
    s.submit("a", basic("g", pods(2, cpu="1")))
    s.finish("a", ("g", "p-0", "Succeeded"))
    s.submit("b", basic("g", pods(1, cpu="1")))
    return s


def test_finished_pods_of_a_withdrawn_or_unplaced_workload_are_skipped() -> None:
    s = _finished()
    doc = _report(s.events, {"withdraw": ["default/a"]})
    assert doc["inputs"]["skipped"] == 2  # a's submission and its PodsFinished
    assert _row(doc, "a")["whatIf"] is None and _row(doc, "b")["whatIf"]["phase"] == "Scheduled"
    # every node cordoned before a's submission: a's pods never run there, so none can finish
    cordoned = _report(s.events, {"nodes": [{"at": 1, "cordon": "n1"}]})
    assert cordoned["inputs"]["skipped"] == 1 and _row(cordoned, "a")["whatIf"]["placedPods"] == 0


def test_finished_pods_that_ran_elsewhere_finish_where_they_ran() -> None:
    s = _finished()
    doc = _report(s.events, {"nodes": [{"at": 1, "add": "n0", "node": {"allocatable": {"cpu": "8"}}}]})
    assert doc["inputs"]["skipped"] == 0
    assert _row(doc, "a")["whatIf"]["placedPods"] == 1  # p-1 runs on; p-0 finished on n0, where it ran


def test_a_capacity_factor_beyond_the_quantities_range_names_the_entry() -> None:
    s = _finished()
    with pytest.raises(WhatIfInvalid) as caught:
        _report(s.events, {"capacity": [{"resource": "pods", "factor": 2},
                                        {"resource": "cpu", "factor": 10 ** 30}]})
    assert caught.value.loc == ["capacity", 1, "factor"]


def test_a_stream_that_cannot_be_re_decided_names_its_position() -> None:
    s = _finished()
    events = list(s.events)
    at = next(i for i, e in enumerate(events) if e.type == "PodGroupScheduled")
    bad = events[at]
    events[at] = Event(bad.position, bad.type, {**bad.data, "pods": [{**bad.data["pods"][0], "node": "ghost"}]})
    with pytest.raises(WhatIfUnfoldable) as caught:
        _report(events, {})
    assert caught.value.position == bad.position and "ghost" in str(caught.value)
    events[at] = Event(bad.position, "NoSuchType", {})
    with pytest.raises(WhatIfUnfoldable) as unknown:
        _report(events, {"from": bad.position})
    assert unknown.value.position == bad.position and "NoSuchType" in str(unknown.value)
