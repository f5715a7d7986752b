"""The corpus: manifests written for this project, each modelled on one upstream example (origins.json
names the repository, path and commit; docs/client.md says why none is copied). Each is converted and
submitted to a real server, the conversion checked field by field, or refused with one clear line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gangplank_client import Client, ProblemError
from gangplank_client.kube import ManifestError, convert

CORPUS = Path(__file__).parent / "corpus"
ORIGINS = json.loads((CORPUS / "origins.json").read_text())
POOL, BLOCK, RACK = "cloud.example.com/node-pool", "cloud.example.com/block", "cloud.example.com/rack"

# per file: pods (all stages), the gangs' minCounts in order, topologies, requests of the first entry,
# stages, warnings, skipped; or "refused" with the line's text; "server" the server's answer when not 201
EXPECTED: dict[str, dict[str, Any]] = {
    "jobset-paralleljobs.yaml": {"pods": 5, "min": [2, 1], "topology": [], "requests": {"cpu": "1"}},
    "jobset-exclusive.yaml": {"pods": 6, "min": [2], "topology": [{"key": POOL, "exclusive": True}],
                              "server": "topology.exclusive"},
    "jobset-depends-on.yaml": {"pods": 5, "min": [1, 1, 3], "stages": 2},
    "jobset-startup-in-order.yaml": {"pods": 3, "min": [1, 2], "stages": 1},
    "jobset-volume-claims.yaml": {"pods": 2, "min": [2], "warnings": 1},
    "jobset-was-bundle.yaml": {"pods": 4, "min": [4], "requests": {"cpu": "2"}},
    "lws-basic.yaml": {"pods": 6, "min": [1, 2]},
    "lws-service.yaml": {"pods": 2, "min": [1, 1], "skipped": 1, "requests": {"cpu": "2", "example.com/gpu": "1"}},
    "lws-exclusive.yaml": {"pods": 12, "min": [1, 3], "topology": [{"key": POOL, "exclusive": True}],
                           "server": "topology.exclusive"},
    "lws-volume-claims.yaml": {"pods": 2, "min": [1, 1], "warnings": 1},
    "kueue-sample-job.yaml": {"pods": 3, "min": [], "requests": {"cpu": "1", "memory": "200Mi"}},
    "kueue-jobset-sliced.yaml": {"pods": 8, "min": [4], "topology": [{"key": BLOCK}, {"key": RACK}]},
    "kueue-cronjob.yaml": {"refused": "batch/v1 CronJob nightly: cannot be converted"},
    "kueue-pytorchjob.yaml": {"refused": "kubeflow.org/v1 PyTorchJob torch: cannot be converted"},
    "website-job-pi.yaml": {"pods": 1, "min": [], "requests": {}},
    "website-job-indexed.yaml": {"pods": 3, "min": [], "requests": {"cpu": "3"}},
}


def _walk(node: dict[str, Any], stamps: int, found: dict[str, list[Any]]) -> None:
    if "topology" in node:
        found["topology"].append(node["topology"])
    for g in node.get("podGroups", []):
        copies = stamps * g.get("count", 1)
        gang = g["schedulingPolicy"].get("gang")
        if gang:
            found["min"].append(gang["minCount"])
        if "topology" in g:
            found["topology"].append(g["topology"])
        for e in g["pods"]:
            found["pods"].append(copies * e.get("count", 1))
            found["requests"].append(e.get("requests", {}))
    for c in node.get("compositePodGroups", []):
        _walk(c, stamps * c.get("count", 1), found)


def facts(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, list[Any]] = {"pods": [], "min": [], "topology": [], "requests": []}
    for body in bodies:
        _walk(body, 1, found)
    unique_topology = []
    for t in found["topology"]:
        if t not in unique_topology:
            unique_topology.append(t)
    return {"pods": sum(found["pods"]), "min": found["min"], "topology": unique_topology,
            "requests": found["requests"][0] if found["requests"] else None}


def test_every_file_has_its_origin_and_an_expectation():
    files = sorted(p.name for p in CORPUS.glob("*.yaml"))
    assert files == sorted(ORIGINS) == sorted(EXPECTED)
    for origin in ORIGINS.values():
        assert origin["repository"] and origin["path"] and origin["commit"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file(name: str, server: str, cluster: str) -> None:
    expected = EXPECTED[name]
    text = (CORPUS / name).read_text()
    if "refused" in expected:
        with pytest.raises(ManifestError) as exc:
            convert(text)
        assert len(str(exc.value).splitlines()) == 1 and expected["refused"] in str(exc.value)
        return
    result = convert(text)
    bodies = [b for _, b in result.workloads] + [s.body for s in result.stages]
    got = facts(bodies)
    assert got["pods"] == expected["pods"], got
    assert got["min"] == expected["min"], got
    assert got["topology"] == expected.get("topology", []), got
    if "requests" in expected:
        assert got["requests"] == expected["requests"], got
    assert len(result.stages) == expected.get("stages", 0)
    assert len(result.warnings) == expected.get("warnings", 0), result.warnings
    assert len(result.skipped) == expected.get("skipped", 0), result.skipped
    with Client(server, cluster=cluster) as c:
        for pool in ("p1", "p2", "p3"):
            for rack in ("r1", "r2"):
                c.put_node(f"{pool}-{rack}", allocatable={"cpu": "32", "memory": "64Gi", "example.com/gpu": "8"},
                           labels={POOL: pool, BLOCK: "b1" if pool != "p3" else "b2", RACK: f"{pool}-{rack}"})
        for ns, body in [*result.workloads, *((s.namespace, s.body) for s in result.stages)]:
            if "server" in expected:
                with pytest.raises(ProblemError) as refused:
                    c.submit(ns, body)
                assert refused.value.status == 422 and expected["server"] in str(refused.value)
                continue
            view = c.submit(ns, body)
            pods = [p for g in view.status.pod_groups for p in g.pods]
            assert view.status.phase == "Scheduled" and all(p.node for p in pods), (name, view.status)
