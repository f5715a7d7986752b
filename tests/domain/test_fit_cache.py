"""The per-shape fit caches of topology placement (domains.DomainFits) follow usage exactly.

Random streams of rack-topology gangs (several shapes, priorities that preempt), deletions, node
changes and node loss: after every input each cache equals a fresh computation, and the whole
stream decides the same with the caches as with a fresh computation at every use.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.domain.placement import domains as dm
from service.domain.placement import routine as pl
from tests.domain.sim import Sim, gang, pods

SHAPES = [{"cpu": "2"}, {"cpu": "1", "example.com/gpu": "1"}, {"cpu": "3", "memory": "2Gi"}]

ops = st.lists(st.one_of(
    st.tuples(st.just("submit"), st.integers(0, len(SHAPES) - 1), st.integers(1, 6), st.sampled_from([0, 5, 9])),
    st.tuples(st.just("delete"), st.integers(0, 40)),
    st.tuples(st.just("node"), st.integers(0, 7), st.sampled_from(["4", "6", "8"]), st.booleans()),
    st.tuples(st.just("remove"), st.integers(0, 7)),
), min_size=1, max_size=30)


def check_caches(sim: Sim) -> int:
    """Bring every current cache up to date, as a use does, and compare it with a fresh
    computation; returns how many were checked."""
    state = sim.state
    nodes = state.nodes
    checked = 0
    for layout in list(nodes._domain_cache.values()):
        for key in list(getattr(layout, "fits", {})):
            vec = np.frombuffer(key[0], dtype=np.int64)
            g = _a_group_with(sim, key)
            if g is None or len(vec) != nodes.used.shape[1]:
                continue
            hit = dm.domain_fits(state, g, g.spec.pod_shapes[0], layout, vec, np.flatnonzero(vec))
            used = np.take(nodes.used, layout.order, axis=0)
            fit = dm._fit_counts(layout, used, nodes.alloc, np.flatnonzero(vec), vec, dm._FIT_CAP)
            fit[~dm.base_mask(state, g, g.spec.pod_shapes[0])[layout.order]] = 0
            assert np.array_equal(hit.fit, fit)
            assert np.array_equal(hit.ksum, np.add.reduceat(fit, layout.starts))
            assert np.array_equal(hit.usums, np.add.reduceat(used, layout.starts))
            checked += 1
    return checked


def run(stream: list[tuple], check: bool) -> list[str]:
    sim = Sim()
    for i in range(8):
        sim.node(f"n{i}", labels={"rack": f"r{i % 3}"}, cpu="8", memory="8Gi", pods="6", **{"example.com/gpu": "2"})
    submitted: list[str] = []
    out: list[str] = []
    for n, op in enumerate(stream):
        if op[0] == "submit":
            _, shape, count, priority = op
            name = f"w{n}"
            sim.submit(name, gang("g", count, pods(count, **SHAPES[shape]), topology={"key": "rack"}),
                       priority=priority)
            submitted.append(name)
        elif op[0] == "delete" and submitted:
            name = submitted.pop(op[1] % len(submitted))
            sim.delete(name)
        elif op[0] == "node":
            _, i, cpu, cordon = op
            sim.node(f"n{i}", labels={"rack": f"r{i % 3}"}, unschedulable=cordon, cpu=cpu, memory="8Gi",
                     pods="6", **{"example.com/gpu": "2"})
        elif op[0] == "remove" and f"n{op[1]}" in sim.state.nodes.index and \
                sim.state.nodes.alive[sim.state.nodes.index[f"n{op[1]}"]]:
            sim.remove_node(f"n{op[1]}")
        else:
            continue
        out.extend(f"{e.position} {e.type} {sorted(e.data.items())!r}" for e in sim.last)
        if check:
            check_caches(sim)
    return out


def _a_group_with(sim: Sim, key: tuple) -> object | None:
    """A live group whose first shape has this cache key (to bring the cache up to date with)."""
    for wl in sim.state.workloads.values():
        if wl.deleted_at is not None:
            continue
        for g in wl.groups:
            shape = g.spec.pod_shapes[0]
            spec = wl.spec.shapes[shape]
            if (sim.state.shape_vector(wl, shape).tobytes(), spec.node_selector, spec.tolerations,
                    spec.required) == key:
                return g
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_fit_caches_follow_usage_and_decide_as_a_fresh_computation(stream):
    cached = run(stream, check=True)
    rebuild = dm.domain_fits

    def fresh_each_time(state, g, shape, layout, vec, cols):  # noqa: ANN001, ANN202
        layout.fits.clear()
        return rebuild(state, g, shape, layout, vec, cols)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(dm, "domain_fits", fresh_each_time)
        fresh = run(stream, check=False)
    assert cached == fresh


def test_a_cache_used_during_a_trial_follows_its_rollback():
    """A cache brought up to date while a trial's usage is applied (as a preemption simulation or
    a nested attempt may) must see the rows again once the trial is rolled back."""
    sim = Sim()
    for i in range(6):
        sim.node(f"n{i}", labels={"rack": f"r{i % 2}"}, cpu="8", pods="6")
    sim.submit("a", gang("g", 2, pods(2, cpu="2"), topology={"key": "rack"}))
    sim.submit("b", gang("g", 2, pods(2, cpu="2"), topology={"key": "rack"}))
    assert check_caches(sim) == 1
    state = sim.state
    trial = pl.Trial(state)
    g = state.workloads[("default", "b")].groups[0]
    vec = state.shape_vector(g.workload, g.spec.pod_shapes[0])
    for row in range(3):
        trial.add(row, vec * 3)
    assert check_caches(sim) == 1  # up to date with the trial applied
    trial.rollback()
    assert check_caches(sim) == 1  # and again without it
