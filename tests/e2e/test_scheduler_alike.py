"""sharing.md: a cluster configured with MostAllocated decides byte for byte as one never configured,
over HTTP, on a stream with shareable devices (positions kept aligned by a no-op input)."""
from __future__ import annotations

import json
import re

from tests.e2e.helpers import Api

SLICE = {"driver": "gpu.example.com", "pool": {"name": "n1", "generation": 1}, "nodeName": "n1", "devices": [
    {"name": f"gpu-{i}", "allowMultipleAllocations": True, "attributes": {"index": {"int": i}},
     "capacity": {"milli": {"value": "1000"}}} for i in range(2)]}


def _stream(api: Api, configured: bool) -> list[str]:
    if configured:
        r = api.client.put(api.url("/scheduler"), json={"scoringStrategy": {"type": "MostAllocated"}})
    else:
        r = api.client.put(api.url("/priorityclasses/pc"), json={"value": 1})
    assert r.status_code == 200, r.text
    assert api.client.put(api.url("/deviceclasses/gpu"), json={
        "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}).status_code == 200
    assert api.put_node("n1", {"allocatable": {"cpu": "8"}}).status_code == 200
    assert api.client.put(api.url("/resourceslices/n1-gpus"), json=SLICE).status_code == 200
    for i in range(4):
        body = {"name": f"w{i}", "resourceClaimTemplates": [{"name": "t", "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu", "capacity": {"requests": {"milli": str(300 + 100 * i)}}}}]}}}],
            "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}}, "pods": [
                {"name": "p", "requests": {"cpu": "1"}, "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}]}]}
        assert api.submit(body).status_code == 201
    decisions = [e for e in api.all_events() if e["type"] not in (
        "PriorityClassUpserted", "SchedulerConfigured", "DeviceClassUpserted", "NodeUpserted",
        "ResourceSliceUpserted", "WorkloadSubmitted")]
    return [re.sub(r'"shareID": "[^"]*"', "", json.dumps([e["position"], e["type"], e["data"]], sort_keys=True))
            for e in decisions]


def test_most_allocated_configured_decides_as_never_configured(client, cluster):
    configured = _stream(Api(client, cluster + "-a"), True)
    plain = _stream(Api(client, cluster + "-b"), False)
    assert configured and [d.replace(cluster + "-a", "C") for d in configured] == \
        [d.replace(cluster + "-b", "C") for d in plain]
