"""bench/trace.py on a slice of the openb trace, in process: the bodies it sends are valid, and every
placement honours the GPU taint and the gpu_spec affinity (the check the bench reports)."""
from __future__ import annotations

import asyncio

import pytest

from bench import trace
from service.schemas import validate_body

pytestmark = pytest.mark.skipif(not (trace.TRACE / "openb_node_list_gpu_node.csv").exists(),
                                reason="the openb trace is not beside the repository")


def test_bodies_are_valid_and_say_what_the_trace_says():
    nodes = trace.read_nodes(trace.TRACE)
    pods = trace.read_pods(trace.pods_file(trace.TRACE))
    assert len(nodes) == 1213 and sum(n.gpus for n in nodes) == 6212 and len(pods) == 8152
    node = validate_body("Node", trace.node_body(nodes[0]))
    assert node["taints"] == [trace.TAINT] and node["labels"] == {trace.MODEL_LABEL: nodes[0].model}
    constrained = next(p for p in pods if p.gpus and len(p.models) > 1)
    body = validate_body("Workload", trace.workload_body(constrained.name, constrained))
    entry = body["podGroups"][0]["pods"][0]
    assert entry["tolerations"] == [trace.TOLERATION]
    terms = entry["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": trace.MODEL_LABEL, "operator": "In", "values": list(constrained.models)}]}]
    sharing = next(p for p in pods if p.gpus == 1 and p.gpu_milli < 1000)
    assert trace.workload_body("s", sharing)["podGroups"][0]["pods"][0]["requests"][trace.GPU] == "1"  # a whole GPU
    cpu_only = next(p for p in pods if not p.gpus)
    assert "tolerations" not in trace.workload_body("c", cpu_only)["podGroups"][0]["pods"][0]


def test_a_replay_slice_places_every_pod_where_it_may_go():
    nodes = trace.read_nodes(trace.TRACE)
    pods = [p for p in trace.read_pods(trace.pods_file(trace.TRACE)) if p.models or not p.gpus][:100]
    result = asyncio.run(trace.replay(trace.InProcess("t"), nodes, pods))
    assert result["check"]["ok"], result["check"]
    gpu_pods = sum(1 for p in pods if p.gpus)
    # CPU-only pods tolerate no GPU node; two pods of the trace fit no node of their model (120 cores on G2)
    assert gpu_pods - 2 <= result["placements"] <= gpu_pods
    assert result["check"]["placements_checked"] == result["placements"]
