"""Resource names are columns of the node table; adding them must cost amortised O(size), not O(size²).

Found by the HTTP conformance audit: one valid 800 KB node body with 30,000 resource names made its
NodeUpserted take ~100 s in `evolve` (and blocked the event loop for as long, also on every restart's
rebuild), because `NodeTable.column` grows `alloc`, `declared` and `used` by one column with `np.pad`
per new name. The HTTP and Kafka adapters now refuse more than 128 resources per map and per workload
(service/schemas/common.py MAX_RESOURCES), which bounds one request; a cluster still accumulates columns
over many requests (every distinct resource name ever seen, in allocatable or in requests), each new
one copying the whole table. The fix belongs in service/domain/nodes/table.py (NodeTable.column: grow the
column capacity geometrically, as _grow does for rows, and keep the logical width apart).
"""
from __future__ import annotations

import time

import pytest

from service.domain.model.specs import NodeSpec
from service.domain.nodes.table import NodeTable


@pytest.mark.xfail(reason="NodeTable.column pads every array by one column per new resource name (quadratic); "
                          "owned by the decider's performance work (service/domain/nodes/table.py)", strict=False)
def test_many_resource_names_are_added_in_amortised_time():
    table = NodeTable()
    for i in range(16):
        table.upsert(NodeSpec(name=f"n{i}", labels=(), allocatable=(("cpu", 1000),), unschedulable=False))
    started = time.perf_counter()
    for k in range(3_000):  # amortised: a few ms; one np.pad per column: seconds, growing with the square
        table.column(f"example.com/r{k}")
    assert time.perf_counter() - started < 0.5


def test_a_cluster_refuses_resource_names_beyond_its_bound(monkeypatch):
    """Every resource name is a column of the node table for good: a cluster accepts at most
    MAX_CLUSTER_RESOURCES names (a 422 naming the field), so no one can widen it without end."""
    from service.domain.decide import commands
    from service.domain.decide.commands import Rejection, accept
    from tests.domain.sim import Sim, basic, pods

    monkeypatch.setattr(commands, "MAX_CLUSTER_RESOURCES", 4)  # pods, cpu, memory and one more
    s = Sim()
    s.node("a", cpu="4", memory="8Gi")
    s.node("b", cpu="4", **{"example.com/gpu": "1"})
    refused = accept(s.state, "UpsertNode", "c", None, {"allocatable": {"example.com/fpga": "1"}})
    assert isinstance(refused, Rejection) and refused.status == 422
    assert refused.loc == ("body", "allocatable") and "example.com/fpga" in refused.detail
    body = {"name": "w", "podGroups": [basic("g", pods(1, **{"example.com/tpu": "1"}))]}
    refused = accept(s.state, "SubmitWorkload", "w", "ns", body)
    assert isinstance(refused, Rejection) and refused.loc == ("body", "podGroups")
    # names the cluster knows stay usable
    assert not isinstance(accept(s.state, "UpsertNode", "c", None, {"allocatable": {"example.com/gpu": "2"}}),
                          Rejection)
    s.submit("known", basic("g", pods(1, cpu="1", **{"example.com/gpu": "1"})))
    assert s.group("known")["phase"] == "Scheduled"
