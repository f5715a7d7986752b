"""WorkloadBuilder: the bodies of http.md and composite.md, refused before sending when they cannot be valid."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangplank_client import BuildError, WorkloadBuilder, quantity
from service.domain.model.quantity import QuantityError, parse_quantity
from service.schemas.validate import InputValidationError, validate_body


def server_errors(body: dict) -> list[tuple]:
    import json
    try:
        validate_body("Workload", json.dumps(body).encode(), namespace="team-a")
    except InputValidationError as exc:
        return [tuple(e["loc"]) for e in exc.errors]
    return []


def test_the_spec_example_builds_and_the_server_accepts_it():
    body = (WorkloadBuilder("train-7").priority_class("high").gang("workers", min_count=4, topology="example.com/rack")
            .pods("worker", count=4, requests={"cpu": "8", "example.com/gpu": "8"}).build())
    assert body == {"name": "train-7", "priorityClassName": "high", "podGroups": [
        {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}, "topology": {"key": "example.com/rack"},
         "pods": [{"name": "worker", "count": 4, "requests": {"cpu": "8", "example.com/gpu": "8"}}]}]}
    assert server_errors(body) == []


def composite_example() -> WorkloadBuilder:
    return (WorkloadBuilder("llm").priority(100)
            .composite("serve", min_group_count=2, topology="example.com/block")
            .composite("replica", count=3, min_group_count=2, topology="example.com/rack", disruption_mode="All")
            .gang("leader", min_count=1, disruption_mode="All").pods("leader", requests={"cpu": "8"})
            .gang("workers", min_count=4, disruption_mode="All").pods("worker", count=4, requests={"cpu": "8"})
            .end().end())


def test_composite_trees_as_composite_md_shapes_them():
    assert composite_example().build() == {"name": "llm", "priority": 100, "compositePodGroups": [
        {"name": "serve", "schedulingPolicy": {"gang": {"minGroupCount": 2}}, "topology": {"key": "example.com/block"},
         "compositePodGroups": [
             {"name": "replica", "schedulingPolicy": {"gang": {"minGroupCount": 2}}, "count": 3,
              "topology": {"key": "example.com/rack"}, "disruptionMode": "All", "podGroups": [
                  {"name": "leader", "schedulingPolicy": {"gang": {"minCount": 1}}, "disruptionMode": "All",
                   "pods": [{"name": "leader", "count": 1, "requests": {"cpu": "8"}}]},
                  {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}, "disruptionMode": "All",
                   "pods": [{"name": "worker", "count": 4, "requests": {"cpu": "8"}}]}]}]}]}


def locs(builder: WorkloadBuilder) -> list[tuple]:
    with pytest.raises(BuildError) as exc:
        builder.build()
    assert isinstance(exc.value, ValueError)
    return [e.loc for e in exc.value.errors]


def test_flat_refusals_name_each_field():
    b = (WorkloadBuilder("Train").priority(1).priority_class("x").gang("w", min_count=6)
         .pods("p", count=4, requests={"cpu": "0.5m", "memory": "1.5", "pods": "1"})
         .pods("p", requests={"cpu": "-1"}).basic("w").pods("q", resource_claims=[
             {"name": "c", "resourceClaimTemplateName": "missing"}]))
    assert locs(b) == [
        ("body", "name"), ("body", "priorityClassName"),
        ("body", "podGroups", 0, "pods", 0, "requests", "cpu"), ("body", "podGroups", 0, "pods", 0, "requests", "memory"),
        ("body", "podGroups", 0, "pods", 0, "requests", "pods"), ("body", "podGroups", 0, "pods", 1, "name"),
        ("body", "podGroups", 0, "pods", 1, "requests", "cpu"),
        ("body", "podGroups", 0, "schedulingPolicy", "gang", "minCount"), ("body", "podGroups", 1, "name"),
        ("body", "podGroups", 1, "pods", 0, "resourceClaims", 0, "resourceClaimTemplateName")]


def test_sizes_counts_and_pods():
    b = WorkloadBuilder("big")
    for i in range(9):
        b.basic(f"g{i}").pods("p", count=1200)
    assert ("body", "podGroups") in locs(b)  # 9 groups and 10,800 pods
    assert locs(WorkloadBuilder("w").basic("g")) == [("body", "podGroups", 0, "pods")]
    assert locs(WorkloadBuilder("w")) == [("body", "podGroups")]
    assert locs(WorkloadBuilder("w").basic("g", count=2).pods("p")) == [("body", "podGroups", 0, "count")]


def test_tree_refusals():
    deep = (WorkloadBuilder("deep").composite("a").composite("b").composite("c").composite("d")
            .basic("g").pods("p").end().end().end().end())
    assert ("body", "compositePodGroups", 0, "compositePodGroups", 0, "compositePodGroups", 0,
            "compositePodGroups") in locs(deep)
    too_many = WorkloadBuilder("t").composite("r", min_group_count=3).basic("g", count=2).pods("p").end()
    assert locs(too_many) == [("body", "compositePodGroups", 0, "schedulingPolicy", "gang", "minGroupCount")]
    clash = (WorkloadBuilder("t").composite("r", count=2).basic("g").pods("p").end()
             .composite("r-0-g").basic("x").pods("p").end())
    assert locs(clash) == [("body", "compositePodGroups", 1, "name")]  # r-0-g is also the stamped child's name
    modes = WorkloadBuilder("t").composite("r", disruption_mode="All").basic("g", disruption_mode="Single").pods("p")
    assert locs(modes.end()) == [("body", "compositePodGroups", 0, "podGroups", 0, "disruptionMode")]
    long = WorkloadBuilder("t").composite("r" * 60, count=12).basic("g").pods("p").end()
    assert ("body", "compositePodGroups", 0, "podGroups", 0, "name") in locs(long)
    both = WorkloadBuilder("t").basic("g").pods("p").composite("r").basic("h").pods("p").end()
    assert locs(both) == [("body", "compositePodGroups")]
    with pytest.raises(ValueError):
        WorkloadBuilder("t").pods("p")
    with pytest.raises(ValueError):
        WorkloadBuilder("t").end()


@given(st.one_of(st.from_regex(r"\A[+-]?(\d{1,4}(\.\d{0,4})?|\.\d{1,3})([eE][+-]?\d{1,2}|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?\Z"),
                 st.integers(-10, 10**6), st.text(max_size=6)),
       st.sampled_from(["cpu", "memory", "example.com/gpu"]))
def test_quantities_are_checked_as_the_server_checks_them(value, resource):
    try:
        parse_quantity(value, resource)
        server_ok = True
    except QuantityError:
        server_ok = False
    assert (quantity.check(value, resource) is None) == server_ok
