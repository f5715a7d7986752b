"""The filter table (service/domain/nodes/filters.py): one ordered list of rows shared by placement
and explanations; a row added to it is obeyed by both."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from service.domain.nodes import filters
from tests.domain.sim import Sim, basic, pods
from tests.domain.test_devices import device_class, gpus_node, submit_claiming, template


def _cluster() -> Sim:
    s = Sim()
    s.node("cordoned", cpu="8", unschedulable=True)
    s.node("other-pool", labels={"pool": "b"}, cpu="8")
    s.node("small", labels={"pool": "a"}, cpu="1")
    s.node("fits", labels={"pool": "a"}, cpu="8")
    return s


def _reasons(s: Sim, wl: str) -> dict[str, int]:
    return {r["message"]: r["nodes"] for r in s.group(wl)["explanation"]["reasons"]}


def test_each_node_counts_under_the_first_row_that_rejects_it():
    s = _cluster()
    s.submit("big", basic("g", {**pods(1, cpu="16"), "nodeSelector": {"pool": "a"}}))
    # cordoned fails schedulable (not also the selector), other-pool the selector (not also cpu)
    assert _reasons(s, "big") == {filters.UNSCHEDULABLE: 1, filters.AFFINITY: 1, "Insufficient cpu": 2}


def test_placement_uses_only_nodes_every_static_row_passes():
    s = _cluster()
    s.submit("w", basic("g", {**pods(1, cpu="2"), "nodeSelector": {"pool": "a"}}))
    assert s.placements("w") == {"p-0": "fits"}
    mask = filters.static_mask(s.state.nodes, s.state.workloads[("default", "w")].spec.shapes[0])
    assert [s.state.nodes.names[r] for r in np.flatnonzero(mask)] == ["small", "fits"]


def test_a_row_added_to_the_table_is_obeyed_by_placement_and_explanations(monkeypatch: pytest.MonkeyPatch):
    reason = "node(s) didn't pass the example filter"

    def not_fits(pod: filters.Pod) -> np.ndarray:
        nodes = pod.nodes
        return np.array([name != "fits" for name in nodes.names[: nodes.count]], dtype=bool)

    row = filters.Filter("example", reason, not_fits, static=True)
    table = (filters.FILTERS[0], row, *filters.FILTERS[1:])
    monkeypatch.setattr(filters, "FILTERS", table)
    monkeypatch.setattr(filters, "STATIC", tuple(f for f in table if f.static))
    s = _cluster()
    s.submit("w", basic("g", {**pods(1, cpu="2"), "nodeSelector": {"pool": "a"}}))
    assert s.placements("w") == {"p-0": None}
    assert _reasons(s, "w") == {filters.UNSCHEDULABLE: 1, reason: 1, filters.AFFINITY: 1, "Insufficient cpu": 1}


def test_a_snapshot_of_a_state_with_devices_decides_as_the_live_state():
    live = Sim()
    device_class(live)
    gpus_node(live, "n1", [0, 0, 1, 1])
    submit_claiming(live, "a", template("two", 2, match=True))
    restored = Sim()
    restored.state = pickle.loads(pickle.dumps(live.state, protocol=pickle.HIGHEST_PROTOCOL))
    for s in (live, restored):
        submit_claiming(s, "b", template("two", 2, match=True))
        submit_claiming(s, "c", template("two", 2, match=True))
    assert [e.data for e in live.last] == [e.data for e in restored.last]
    assert live.group("b")["claims"] == restored.group("b")["claims"] != []
    assert live.group("c")["explanation"] == restored.group("c")["explanation"] is not None
