"""The optimised placement routine against a naive transcription of model.md.

The reference scores every feasible node for every pod with Fractions and takes the
best, smallest name on ties: no float screening, no row walking, no domain sums.
Random clusters use small, uneven allocatables so that exact ties between different
terms (1/3 + 2/3 = 1/2 + 1/2) and float near-ties are common.
"""
from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from service.domain.state.cluster import ClusterState
from tests.domain.sim import Sim, gang, pods

CPU = st.sampled_from([1, 2, 3, 4, 6])
MEM = st.sampled_from([2, 3, 4, 6, 9])


def _free(state: ClusterState, row: int, res: str) -> int:
    nodes = state.nodes
    col = nodes.resources.get(res)
    if col is None or not nodes.declared[row, col]:
        return -1
    return int(nodes.alloc[row, col] - nodes.used[row, col])


def reference_place(state: ClusterState, count: int, req: dict[str, int],
                    rows: list[int]) -> list[str]:
    """Pods one by one, each on the node with the highest exact mean, then smallest name."""
    nodes = state.nodes
    used = {r: {res: int(nodes.used[r, nodes.resources[res]]) if res in nodes.resources else 0
                for res in req} for r in rows}
    alloc = {r: {res: _free(state, r, res) + used[r][res] if _free(state, r, res) >= 0 else 0
                 for res in req} for r in rows}
    out: list[str] = []
    for _ in range(count):
        best: tuple[Fraction, str, int] | None = None
        for r in rows:
            if any(used[r][res] + q > alloc[r][res] for res, q in req.items()):
                continue
            score = sum((Fraction(used[r][res] + q, alloc[r][res]) for res, q in req.items()
                         if alloc[r][res] > 0), Fraction(0)) / len(req)
            name = nodes.names[r]
            if best is None or score > best[0] or (score == best[0] and name < best[1]):
                best = (score, name, r)
        if best is None:
            break
        for res, q in req.items():
            used[best[2]][res] += q
        out.append(best[1])
    return out


@settings(max_examples=60, deadline=None)
@given(nodes=st.lists(st.tuples(CPU, MEM), min_size=1, max_size=9),
       fills=st.lists(st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(0, 3)), max_size=6),
       probe=st.tuples(st.integers(1, 12), st.integers(1, 2), st.integers(1, 3)))
def test_gang_placement_equals_the_naive_rule(nodes, fills, probe):
    s = Sim()
    for i, (cpu, mem) in enumerate(nodes):
        s.node(f"n{(i * 7) % 10}{i}", cpu=str(cpu), memory=str(mem))
    for j, (count, cpu, mem) in enumerate(fills):
        s.submit(f"fill-{j}", gang("g", 1, pods(count, cpu=str(cpu), memory=str(mem))))
    count, cpu, mem = probe
    req = {"cpu": cpu * 1000, "memory": mem}
    expected = reference_place(s.state, count, req, [int(r) for r in s.state.nodes.live_indices()])
    s.submit("probe", gang("g", 1, pods(count, cpu=str(cpu), memory=str(mem))))
    placed = s.placements("probe")
    assert [placed[f"p-{i}"] for i in range(len(expected))] == expected
    assert all(placed[f"p-{i}"] is None for i in range(len(expected), count))


def test_exact_tie_between_different_loads_goes_to_the_smaller_name():
    # equal allocatable; a: (0+1)/6 + (3+1)/9, b: (2+1)/6 + (0+1)/9: equal exactly (11/18), but
    # b's float sum is one ulp higher. The smaller name must win, not the larger float.
    s = Sim()
    s.node("a", labels={"n": "a"}, cpu="6", memory="9")
    s.node("b", labels={"n": "b"}, cpu="6", memory="9")
    s.submit("on-a", gang("g", 1, {**pods(1, cpu="0", memory="3"), "nodeSelector": {"n": "a"}}))
    s.submit("on-b", gang("g", 1, {**pods(1, cpu="2", memory="0"), "nodeSelector": {"n": "b"}}))
    s.submit("probe", gang("g", 1, pods(1, cpu="1", memory="1")))
    assert s.placements("probe") == {"p-0": "a"}


def reference_domain(state: ClusterState, count: int, need: int, req: dict[str, int],
                     key: str) -> tuple[str | None, list[str]]:
    """model.md *Topology*: place inside each domain; the best exact domain score wins."""
    nodes = state.nodes
    live = [int(r) for r in nodes.live_indices()]
    best: tuple[Fraction, str, list[str]] | None = None
    for value in sorted({nodes.labels[r][key] for r in live if key in nodes.labels[r]}):
        rows = [r for r in live if nodes.labels[r].get(key) == value]
        placed = reference_place(state, count, req, rows)
        if len(placed) < need:
            continue
        score = Fraction(0)
        for res, q in req.items():
            col = nodes.resources[res]
            alloc = sum(int(nodes.alloc[r, col]) for r in rows if nodes.declared[r, col])
            if alloc:
                score += Fraction(sum(int(nodes.used[r, col]) for r in rows) + q * len(placed), alloc)
        if best is None or score > best[0]:
            best = (score, value, placed)
    return (best[1], best[2]) if best else (None, [])


@settings(max_examples=60, deadline=None)
@given(nodes=st.lists(st.tuples(CPU, MEM, st.integers(0, 3)), min_size=1, max_size=10),
       fills=st.lists(st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(0, 3)), max_size=6),
       probe=st.tuples(st.integers(1, 8), st.integers(1, 2), st.integers(1, 3)),
       need=st.integers(1, 8))
def test_topology_domain_equals_the_naive_rule(nodes, fills, probe, need):
    s = Sim()
    for i, (cpu, mem, rack) in enumerate(nodes):
        s.node(f"n{i}", labels={"rack": f"r{rack}"}, cpu=str(cpu), memory=str(mem))
    for j, (count, cpu, mem) in enumerate(fills):
        s.submit(f"fill-{j}", gang("g", 1, pods(count, cpu=str(cpu), memory=str(mem))))
    count, cpu, mem = probe
    need = min(need, count)
    req = {"cpu": cpu * 1000, "memory": mem}
    domain, expected = reference_domain(s.state, count, need, req, "rack")
    s.submit("probe", gang("g", need, pods(count, cpu=str(cpu), memory=str(mem)), topology={"key": "rack"}))
    placed = s.placements("probe")
    if domain is None:
        assert all(v is None for v in placed.values())
        return
    assert s.group("probe")["phase"] == "Scheduled"
    assert [placed[f"p-{i}"] for i in range(len(expected))] == expected
    assert all(s.state.nodes.labels[s.state.nodes.index[n]]["rack"] == domain
               for n in placed.values() if n is not None)
