"""Record a golden stream (audit.md, *Golden streams*): a fixed scenario through the public API.

Starts `python -m service serve` of the code it is run with (an SQLite file in a temporary
directory, a free loopback port), sends the scenario's requests over HTTP, then writes the
cluster's export (`python -m service export`) to OUT. Requests that a release does not know (a tree
before trees existed, taints before taints) are refused with a 4xx and record nothing, so the same
scenario records with every release: what each knows. The scenario covers gangs, basic groups,
topology groups, preemption with reprieve, DRA with claims shared by a group and a workload, a
NoExecute taint, node loss, a slice removed, deletions, and trees.

    python tests/golden/generate.py OUT.jsonl            # with this checkout's code
    (cd /tmp/old-checkout && .venv/bin/python /path/to/generate.py OUT.jsonl)   # with an older release

The run is deterministic in what it decides (only the envelopes' times and ids differ from run to run).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

CLUSTER = "golden"
GPU = "gpu.example.com"
NIC = "net.example.com"


def _gang(name: str, min_count: int, count: int, cpu: str = "1", **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"gang": {"minCount": min_count}},
            "pods": [{"name": "p", "count": count, "requests": {"cpu": cpu, "memory": "1Gi"}}], **extra}


def _basic(name: str, count: int, cpu: str = "1", **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"basic": {}},
            "pods": [{"name": "p", "count": count, "requests": {"cpu": cpu, "memory": "1Gi"}}], **extra}


def _node(rack: int, cpu: str = "8", **more: Any) -> dict[str, Any]:
    return {"labels": {"example.com/rack": f"r{rack}", "example.com/zone": "a" if rack < 3 else "b"},
            "allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}, **more}


def scenario() -> Iterator[tuple[str, str, dict[str, Any] | None]]:
    """(method, path under the cluster, body): the fixed scenario."""
    yield "PUT", "/priorityclasses/batch", {"value": 10}
    yield "PUT", "/priorityclasses/urgent", {"value": 1000}
    yield "PUT", "/deviceclasses/gpu", {"selectors": [{"cel": {"expression": f"device.driver == '{GPU}'"}}]}
    yield "PUT", "/deviceclasses/nic", {"selectors": [{"cel": {"expression": f"device.driver == '{NIC}'"}}]}
    for rack in range(1, 5):
        for i in range(1, 5):
            yield "PUT", f"/nodes/r{rack}-n{i}", _node(rack)
    for i in (1, 2):  # GPUs on rack 1, a fabric shared by rack 2
        yield "PUT", f"/resourceslices/r1-n{i}-gpus", {
            "driver": GPU, "pool": {"name": f"r1-n{i}", "generation": 1}, "nodeName": f"r1-n{i}",
            "devices": [{"name": f"gpu-{d}", "attributes": {"model": {"string": "H100"}}} for d in range(4)]}
    yield "PUT", "/resourceslices/fabric-r2", {
        "driver": NIC, "pool": {"name": "r2"}, "nodeSelector": {"example.com/rack": "r2"},
        "devices": [{"name": "nic-0"}, {"name": "nic-1"}]}
    ns = "/namespaces/team-a/workloads"
    nb = "/namespaces/team-b/workloads"
    # gangs, basic groups, topology: fill most of the cluster at low priority
    for i in range(6):
        yield "POST", ns, {"name": f"train-{i}", "priorityClassName": "batch",
                           "podGroups": [_gang("workers", 4, 6, cpu="2", topology={"key": "example.com/rack"})]}
    for i in range(4):
        yield "POST", ns, {"name": f"batch-{i}", "priority": 5, "podGroups": [_basic("tasks", 5, cpu="1")]}
    yield "POST", ns, {"name": "all-or-nothing", "priority": 5,
                       "podGroups": [_gang("workers", 3, 3, cpu="1", disruptionMode="All")]}
    # DRA: per-pod GPUs, a group-shared fabric NIC, a workload-wide claim
    gpus = {"name": "gpus", "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu", "count": 2}}]}}}
    nic = {"name": "nic", "spec": {"devices": {"requests": [{"name": "nic", "exactly": {
        "deviceClassName": "nic", "count": 1}}]}}}
    yield "POST", ns, {"name": "gpu-job", "priority": 20, "resourceClaimTemplates": [gpus], "podGroups": [
        {**_gang("workers", 2, 2, cpu="1"),
         "pods": [{"name": "p", "count": 2, "requests": {"cpu": "1"},
                   "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "gpus"}]}]}]}
    yield "POST", ns, {"name": "fabric-job", "priority": 20, "resourceClaimTemplates": [nic], "podGroups": [
        {**_gang("workers", 2, 2, cpu="1"), "resourceClaims": [{"name": "nic", "resourceClaimTemplateName": "nic"}],
         "pods": [{"name": "p", "count": 2, "requests": {"cpu": "1"},
                   "resourceClaims": [{"name": "nic", "resourceClaimTemplateName": "nic"}]}]}]}
    yield "POST", ns, {"name": "wide-job", "priority": 20, "resourceClaimTemplates": [nic],
                       "resourceClaims": [{"name": "wide", "resourceClaimTemplateName": "nic"}],
                       "podGroups": [{**_basic("a", 1), "pods": [{"name": "p", "count": 1, "requests": {"cpu": "1"},
                                                                  "resourceClaims": [{"name": "wide"}]}]}]}
    yield "POST", ns, {"name": "too-many-gpus", "priority": 20, "resourceClaimTemplates": [
        {"name": "gpus", "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu", "count": 8}}]}}}], "podGroups": [
        {**_basic("a", 1), "pods": [{"name": "p", "count": 1, "requests": {"cpu": "1"},
                                     "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "gpus"}]}]}]}
    # a gang that cannot fit, a basic group that waits, a selector nobody matches
    yield "POST", ns, {"name": "huge", "priority": 5, "podGroups": [_gang("workers", 40, 40, cpu="4")]}
    yield "POST", ns, {"name": "picky", "priority": 5, "podGroups": [
        {**_basic("a", 2), "pods": [{"name": "p", "count": 2, "requests": {"cpu": "1"},
                                     "nodeSelector": {"example.com/zone": "nowhere"}}]}]}
    # preemption: urgent gangs and basic pods evict lower priorities, some units reprieved
    yield "POST", nb, {"name": "urgent-0", "priorityClassName": "urgent",
                       "podGroups": [_gang("workers", 6, 6, cpu="4", topology={"key": "example.com/rack"})]}
    yield "POST", nb, {"name": "urgent-1", "priority": 900, "podGroups": [_basic("a", 3, cpu="3")]}
    yield "POST", nb, {"name": "urgent-2", "priority": 800, "podGroups": [_gang("workers", 2, 4, cpu="6")]}
    yield "POST", nb, {"name": "polite", "priority": 700, "preemptionPolicy": "Never",
                       "podGroups": [_gang("workers", 8, 8, cpu="8")]}
    # trees (composite pod groups), where the release knows them
    yield "POST", ns, {"name": "tree", "priority": 50, "compositePodGroups": [{
        "name": "serve", "schedulingPolicy": {"gang": {"minGroupCount": 2}}, "topology": {"key": "example.com/zone"},
        "podGroups": [_gang("leader", 1, 1, cpu="1"), _gang("workers", 2, 2, cpu="1")]}]}
    yield "POST", ns, {"name": "big-tree", "priority": 50, "compositePodGroups": [{
        "name": "top", "schedulingPolicy": {"gang": {"minGroupCount": 2}},
        "podGroups": [_gang("a", 6, 6, cpu="8"), _gang("b", 6, 6, cpu="8")]}]}
    # a node that runs out of pods; a gang at minCount that goes as a whole unit
    yield "PUT", "/nodes/r6-n1", {"labels": {"example.com/rack": "r6"}, "allocatable": {"cpu": "8", "pods": "2"}}
    yield "POST", ns, {"name": "crowd", "priority": 5, "podGroups": [
        {**_basic("a", 3), "pods": [{"name": "p", "count": 3, "requests": {"cpu": "1"},
                                     "nodeSelector": {"example.com/rack": "r6"}}]}]}
    yield "PUT", "/nodes/r7-n1", {"labels": {"example.com/rack": "r7"}, "allocatable": {"cpu": "4", "pods": "110"}}
    yield "POST", ns, {"name": "exact", "priority": 1, "podGroups": [
        {**_gang("workers", 2, 2), "pods": [{"name": "p", "count": 2, "requests": {"cpu": "2"},
                                             "nodeSelector": {"example.com/rack": "r7"}}]}]}
    yield "POST", nb, {"name": "taker", "priority": 1000, "podGroups": [
        {**_basic("a", 1), "pods": [{"name": "p", "count": 1, "requests": {"cpu": "4"},
                                     "nodeSelector": {"example.com/rack": "r7"}}]}]}
    # deletions free room for waiters; node loss; a NoExecute taint; a slice removed; a cordon
    yield "DELETE", f"{ns}/train-0", None
    yield "DELETE", f"{nb}/urgent-1", None
    yield "DELETE", "/nodes/r3-n1", None
    yield "PUT", "/nodes/r4-n4", _node(4, taints=[{"key": "maintenance", "value": "now", "effect": "NoExecute"}])
    yield "PUT", "/nodes/r4-n3", _node(4, unschedulable=True)
    yield "DELETE", "/resourceslices/r1-n2-gpus", None
    yield "DELETE", f"{ns}/huge", None
    yield "POST", nb, {"name": "late", "priority": 30, "podGroups": [
        {**_basic("a", 2), "pods": [{"name": "p", "count": 2, "requests": {"cpu": "1"},
                                     "tolerations": [{"key": "maintenance", "operator": "Exists"}]}]}]}
    yield "PUT", "/nodes/r5-n1", _node(5, cpu="16")
    yield "DELETE", f"{ns}/tree", None
    yield "DELETE", f"{nb}/urgent-0", None
    yield "DELETE", "/nodes/r2-n1", None
    yield "DELETE", f"{ns}/batch-1", None


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def record(out: Path) -> dict[str, int]:
    """Run the scenario against a fresh server of this interpreter's code; write the export to `out`."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{tmp}/golden.db"
        port = _port()
        env = {**os.environ, "GANGPLANK_DATABASE_URL": url}
        env.pop("GANGPLANK_TOKENS", None)
        server = subprocess.Popen([sys.executable, "-m", "service", "serve", "--port", str(port), "--database-url",
                                   url], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
        statuses: dict[str, int] = {}
        try:
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=base, timeout=60) as client:
                for _ in range(300):
                    try:
                        if client.get("/healthz").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    time.sleep(0.1)
                for method, path, body in scenario():
                    r = client.request(method, f"/v1/clusters/{CLUSTER}{path}", json=body)
                    statuses[str(r.status_code)] = statuses.get(str(r.status_code), 0) + 1
                    if r.status_code >= 500:
                        raise SystemExit(f"{method} {path}: {r.status_code} {r.text[:200]}")
        finally:
            server.terminate()
            server.wait(timeout=30)
        exported = subprocess.run([sys.executable, "-m", "service", "export", "--cluster", CLUSTER,
                                   "--database-url", url], env=env, capture_output=True, text=True, cwd=tmp)
        if exported.returncode != 0:
            raise SystemExit(f"export failed: {exported.stderr}")
        out.write_text("".join(line + "\n" for line in exported.stdout.splitlines()
                               if line.strip() and json.loads(line).get("type") != "ChainCheckpoint"))
    return statuses


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python tests/golden/generate.py OUT.jsonl")
    out = Path(sys.argv[1]).resolve()
    statuses = record(out)
    types: dict[str, int] = {}
    for line in out.read_text().splitlines():
        t = json.loads(line)["type"]
        types[t] = types.get(t, 0) + 1
    print(json.dumps({"out": str(out), "statuses": statuses, "eventsByType": dict(sorted(types.items()))}))


if __name__ == "__main__":
    main()
