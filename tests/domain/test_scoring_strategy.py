"""The scoring strategy seam (domain/placement/scoring.py, `configure`): LeastAllocated spreads, by the exact score of
audit.md (*What-if*), ties to the smaller node name; MostAllocated (the default) packs."""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from service.domain import ClusterState, Event, accept, handle
from service.domain.placement import scoring


def _run(state: ClusterState, kind: str, name: str, ns: str | None = None, body: dict[str, Any] | None = None
         ) -> list[Event]:
    etype, data = accept(state, kind, name, ns, body or {})  # type: ignore[misc]
    return handle(state, Event(state.position + 1, etype, data))


def _nodes_of(decisions: list[Event]) -> list[str]:
    return [p["node"] for d in decisions if d.type == "PodGroupScheduled" for p in d.data["pods"]]


def _cluster(strategy: str, nodes: dict[str, str]) -> ClusterState:
    state = ClusterState("c")
    scoring.configure(state, {"type": strategy})  # the one seam: what-if passes a strategy so
    for name, cpu in nodes.items():
        _run(state, "UpsertNode", name, body={"allocatable": {"cpu": cpu, "pods": 20}})
    return state


def _submit(state: ClusterState, name: str, pods: int, cpu: str) -> list[Event]:
    return _run(state, "SubmitWorkload", name, "a", {
        "name": name, "podGroups": [{"name": "g", "pods": [{"name": "p", "count": pods, "requests": {"cpu": cpu}}]}]})


def test_least_allocated_spreads_and_most_allocated_packs() -> None:
    most = _cluster("MostAllocated", {"n1": "4", "n2": "4"})
    least = _cluster("LeastAllocated", {"n1": "4", "n2": "4"})
    assert _nodes_of(_submit(most, "w", 2, "1")) == ["n1", "n1"]
    assert _nodes_of(_submit(least, "w", 2, "1")) == ["n1", "n2"]  # a tie first: the smaller name


def test_least_allocated_prefers_the_emptier_node_exactly() -> None:
    # n1 has 8 cpu with 3 used (5/8 free after a 1-cpu pod is 4/8), n2 has 4 with 1 used (2/4 after): equal, n1 wins;
    # with n1 at 4 used: 3/8 < 2/4, n2 wins
    state = _cluster("LeastAllocated", {"n1": "8", "n2": "4"})
    _run(state, "UpsertNode", "n2", body={"allocatable": {"cpu": "4", "pods": 20}, "unschedulable": True})
    _submit(state, "fill1", 3, "1")
    _run(state, "UpsertNode", "n2", body={"allocatable": {"cpu": "4", "pods": 20}})
    _run(state, "UpsertNode", "n1", body={"allocatable": {"cpu": "8", "pods": 20}, "unschedulable": True})
    _submit(state, "fill2", 1, "1")
    _run(state, "UpsertNode", "n1", body={"allocatable": {"cpu": "8", "pods": 20}})
    assert _nodes_of(_submit(state, "tie", 1, "1")) == ["n1"]
    assert _nodes_of(_submit(state, "next", 1, "1")) == ["n2"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=4), st.lists(st.tuples(st.integers(1, 6), st.integers(1, 4)),
                                                                    min_size=1, max_size=8))
def test_least_allocated_never_overcommits(cpus: list[int], workloads: list[tuple[int, int]]) -> None:
    state = _cluster("LeastAllocated", {f"n{i}": str(c) for i, c in enumerate(cpus)})
    for i, (pods, cpu) in enumerate(workloads):
        _submit(state, f"w{i}", pods, str(cpu))
    nodes = state.nodes
    assert (nodes.used[: nodes.count] <= nodes.alloc[: nodes.count]).all()


def test_one_way_to_place_per_strategy_name_chosen_by_one_function_of_the_state() -> None:
    from service.domain.placement.routine import PLACE_RUN

    assert set(PLACE_RUN) == set(scoring.STRATEGIES)
    state = ClusterState("c")
    assert scoring.strategy_of(state).type == scoring.MOST_ALLOCATED  # never configured
    for name in scoring.STRATEGIES:
        body: dict[str, Any] = {"type": name}
        if name == scoring.FRAGMENTATION_AWARE:
            body["fragmentationAware"] = {"deviceClassName": "gpu", "capacity": "milli",
                                          "targetWorkload": {"fromHistory": {}}}
        scoring.configure(state, body)
        assert scoring.strategy_of(state).type == name


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(3, 8), min_size=1, max_size=4),  # the first pod always fits: placed > 0
       st.lists(st.tuples(st.integers(1, 5), st.sampled_from(["500m", "1", "1500m", "2", "3"])), min_size=1, max_size=6))
def test_least_allocated_is_the_specs_score(cpus: list[int], workloads: list[tuple[int, str]]) -> None:
    """Written from audit.md (*What-if*): each pod goes to the feasible node of highest mean over its
    requested resources of (allocatable − used − request) / allocatable, exactly, ties to the smaller name."""
    from fractions import Fraction

    alloc = {f"n{i}": Fraction(c * 1000) for i, c in enumerate(cpus)}
    used = {n: Fraction(0) for n in alloc}
    pods_used = {n: 0 for n in alloc}
    state = _cluster("LeastAllocated", {n: str(c) for n, c in zip(alloc, cpus)})
    placed = 0
    for i, (count, cpu) in enumerate(workloads):
        req = Fraction(int(float(cpu[:-1]) if cpu.endswith("m") else float(cpu) * 1000))
        expected = []
        for _ in range(count):
            fit = [n for n in alloc if alloc[n] - used[n] >= req and pods_used[n] < 20]
            if not fit:
                break
            best = max(fit, key=lambda n: ((alloc[n] - used[n] - req) / alloc[n], [-ord(ch) for ch in n]))
            used[best] += req
            pods_used[best] += 1
            expected.append(best)
        got = _nodes_of(_submit(state, f"w{i}", count, cpu))
        assert got == expected
        placed += len(got)
    assert placed > 0
