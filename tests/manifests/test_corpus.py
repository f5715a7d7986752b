"""The corpus: manifests written for this project, each modelled on one upstream example (origins.json
names the repository, path and commit; none is copied). Each is converted and checked field by field
(pods, gang minCounts, topology with exclusivity and mode, the first pod's requests, stages, warnings,
skipped objects), then submitted to one real server for the module: scheduled with every pod placed
and every topology domain honoured on the nodes' labels, each later stage submitted once what it waits
for is reached; or refused with one clear line (by the converter, or by the server for the rules the
decider does not have yet, the line naming the manifest's own path)."""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gangplank_client import Client, ProblemError
from gangplank_client.kube import Conversion, ManifestError, convert

CORPUS = Path(__file__).parent / "corpus"
ORIGINS = json.loads((CORPUS / "origins.json").read_text())
POOL, BLOCK, RACK = "cloud.example.com/node-pool", "cloud.example.com/block", "cloud.example.com/rack"
ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
EXCLUSIVE = "topology.exclusive"  # the server's 422 until the decider has exclusive topology
PREFERRED = "topology.mode"  # and preferred topology
CPU = {"cpu": "250m"}

# per file: pods (all stages), the gangs' minCounts in order, topologies, requests of the first entry,
# stages ("name waits for ..."), warnings, skipped; or "refused" with the line's text; "server" the
# manifest path the server's 422 names, while the decider lacks the rule
EXPECTED: dict[str, dict[str, Any]] = {
    # JobSet
    "jobset-paralleljobs.yaml": {"pods": 5, "min": [2, 1], "requests": {"cpu": "1"}},
    "jobset-exclusive.yaml": {"pods": 6, "min": [2], "topology": [{"key": POOL, "exclusive": True}],
                              "server": (EXCLUSIVE, "metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]")},
    "jobset-depends-on.yaml": {"pods": 5, "min": [1, 1, 3], "stages": [
        "default/pipeline-coordinator waits for default/pipeline (prepare Complete)",
        "default/pipeline-crunch waits for default/pipeline-coordinator (coordinator Ready)"]},
    "jobset-startup-in-order.yaml": {"pods": 3, "min": [1, 2], "stages": [
        "default/lead-first-followers waits for default/lead-first (lead Ready)"]},
    "jobset-volume-claims.yaml": {"pods": 2, "min": [2], "warnings": 1},
    "jobset-was-bundle.yaml": {"pods": 4, "min": [4], "requests": {"cpu": "2"}},
    "jobset-sample-empty.yaml": {"refused": "JobSet sample-from-kustomize: spec: Required value"},
    "jobset-controller-configuration.yaml": {"skipped": 1},
    "jobset-multiple-depends-on.yaml": {"pods": 6, "min": [1, 1, 4], "requests": {"cpu": "500m", "memory": "512Mi"},
                                        "stages": ["default/prepare-then-train-trainer waits for "
                                                   "default/prepare-then-train (fetch-data, fetch-weights Complete)"]},
    "jobset-coordinator.yaml": {"pods": 5, "min": [4, 1], "requests": CPU},
    "jobset-groups.yaml": {"pods": 4, "min": [2, 2], "requests": {"cpu": "300m"}},
    "jobset-network.yaml": {"pods": 3, "min": [1, 2], "requests": {}},
    "jobset-success-policy.yaml": {"pods": 3, "min": [1, 2], "requests": {}},
    "jobset-failure-policy.yaml": {"pods": 4, "min": [2, 2], "requests": {}},
    "jobset-tpu-multislice.yaml": {"pods": 8, "min": [4], "topology": [{"key": POOL, "exclusive": True}],
                                   "requests": {"google.com/tpu": "4"},
                                   "server": (EXCLUSIVE, "metadata.annotations[alpha.jobset.sigs.k8s.io/"
                                                         "exclusive-topology]")},
    "jobset-in-place-restart.yaml": {"pods": 4, "min": [2], "requests": {"cpu": "200m"}},
    "jobset-was-dra.yaml": {"pods": 6, "min": [6], "requests": {"cpu": "500m"}},
    "jobset-was-tas.yaml": {"pods": 4, "min": [4], "topology": [{"key": RACK}], "requests": {"cpu": "500m"}},
    "jobset-was-preemption-high.yaml": {"pods": 4, "min": [4], "requests": {"cpu": "3"}, "skipped": 1},
    "jobset-was-preemption-low.yaml": {"pods": 4, "min": [4], "requests": {"cpu": "3"}, "skipped": 1},
    "jobset-pytorch.yaml": {"pods": 4, "min": [4], "requests": {}},
    "jobset-tensorflow.yaml": {"pods": 2, "min": [2], "requests": {"cpu": "1", "memory": "2Gi"}},
    "jobset-ttl.yaml": {"pods": 4, "min": [4], "requests": {"cpu": "100m"}},
    "jobset-argo-workflow.yaml": {"refused": "argoproj.io/v1alpha1 Workflow make-a-jobset: cannot be converted"},
    "jobset-argo-rbac.yaml": {"skipped": 3},
    "jobset-kind-cluster.yaml": {"skipped": 1},
    # LeaderWorkerSet
    "lws-basic.yaml": {"pods": 6, "min": [1, 2]},
    "lws-service.yaml": {"pods": 2, "min": [1, 1], "skipped": 1, "requests": {"cpu": "2", "example.com/gpu": "1"}},
    "lws-exclusive.yaml": {"pods": 12, "min": [1, 3], "topology": [{"key": POOL, "exclusive": True}],
                           "server": (EXCLUSIVE, "metadata.annotations[leaderworkerset.sigs.k8s.io/exclusive-topology]")},
    "lws-volume-claims.yaml": {"pods": 2, "min": [1, 1], "warnings": 1, "skipped": 1, "requests": {"cpu": "1"}},
    "lws-multi-template.yaml": {"pods": 12, "min": [1, 3], "requests": {"cpu": "60m"}},
    "lws-restart-policy.yaml": {"pods": 12, "min": [1, 3], "requests": {"cpu": "50m"}},
    "lws-rollout-strategy.yaml": {"pods": 16, "min": [1, 3], "requests": {"cpu": "50m"}},
    "lws-tpu.yaml": {"pods": 12, "min": [1, 3], "requests": {"google.com/tpu": "4"}},
    "lws-volcano.yaml": {"pods": 8, "min": [1, 3], "requests": {"cpu": "50m"}},
    "lws-hpa.yaml": {"skipped": 1},
    "lws-sglang.yaml": {"pods": 4, "min": [1, 1], "skipped": 1, "requests": {"nvidia.com/gpu": "1"}},
    "lws-tensorrt.yaml": {"pods": 2, "min": [1, 1], "skipped": 1, "requests": {"nvidia.com/gpu": "8"}},
    "lws-llamacpp.yaml": {"pods": 5, "min": [1, 4], "skipped": 1, "requests": {}},
    "lws-vllm-tpu.yaml": {"pods": 8, "min": [1, 3], "skipped": 1, "requests": {"google.com/tpu": "4"}},
    "lws-disaggregatedset.yaml": {"refused": "disaggregatedset.x-k8s.io/v1 DisaggregatedSet split-serving: cannot be "
                                            "converted"},
    "lws-controller-configuration.yaml": {"skipped": 1},
    # Kueue
    "kueue-sample-job.yaml": {"pods": 3, "min": [], "requests": {"cpu": "1", "memory": "200Mi"}},
    "kueue-jobset-sliced.yaml": {"pods": 8, "min": [4], "topology": [{"key": BLOCK}, {"key": RACK}]},
    "kueue-cronjob.yaml": {"refused": "batch/v1 CronJob nightly: cannot be converted"},
    "kueue-pytorchjob.yaml": {"refused": "kubeflow.org/v1 PyTorchJob torch: cannot be converted"},
    "kueue-quick-start-job.yaml": {"pods": 3, "min": [], "requests": {"cpu": "1", "memory": "200Mi"}},
    "kueue-quick-start-setup.yaml": {"skipped": 3},
    "kueue-jobset.yaml": {"pods": 2, "min": [1, 1], "requests": {"cpu": "1", "memory": "200Mi"}},
    "kueue-jobset-tas-required.yaml": {"pods": 4, "min": [4], "topology": [{"key": RACK}],
                                       "requests": {"cpu": "1", "memory": "200Mi"}},
    "kueue-jobset-tas-slices.yaml": {"pods": 8, "min": [4], "topology": [{"key": RACK}],
                                     "requests": {"cpu": "1", "memory": "200Mi"}},
    "kueue-tas-job-required.yaml": {"pods": 10, "min": [], "topology": [{"key": RACK}],
                                    "requests": {"cpu": "1", "memory": "200Mi"}},
    "kueue-tas-job-preferred.yaml": {"pods": 40, "min": [], "topology": [{"key": BLOCK, "mode": "Preferred"}],
                                     "server": (PREFERRED, "spec.template.metadata.annotations["
                                                           "kueue.x-k8s.io/podset-preferred-topology]")},
    "kueue-tas-job-unconstrained.yaml": {"pods": 6, "min": [], "requests": {"cpu": "1", "memory": "200Mi"}},
    "kueue-tas-queues.yaml": {"skipped": 4},
    "kueue-lws-tas.yaml": {"pods": 6, "min": [1, 2], "topology": [{"key": RACK}], "requests": {"cpu": "100m"},
                           "grouped": True},
    "kueue-lws.yaml": {"pods": 6, "min": [1, 2], "requests": {"cpu": "100m"}},
    "kueue-partial-admission.yaml": {"pods": 20, "min": [], "requests": {"cpu": "1", "memory": "200Mi"}},
    "kueue-scalable-job.yaml": {"pods": 3, "min": [], "requests": {"cpu": "100m", "memory": "100Mi"}},
    "kueue-dra-job.yaml": {"pods": 1, "min": [], "requests": {"cpu": "1", "memory": "200Mi"}},
    "kueue-claim-template-only.yaml": {"skipped": 1},
    "kueue-provisioning-job.yaml": {"pods": 3, "min": [], "requests": {"cpu": "100m", "memory": "100Mi",
                                                                      "nvidia.com/gpu": "1"}},
    "kueue-multikueue-jobs.yaml": {"pods": 5, "min": [], "topology": [{"key": HOST}],
                                   "requests": {"cpu": "1", "memory": "1Gi"}},
    "kueue-statefulset.yaml": {"refused": "apps/v1 StatefulSet web-set: cannot be converted"},
    "kueue-mpijob.yaml": {"refused": "kubeflow.org/v2beta1 MPIJob pi-digits: cannot be converted"},
    "kueue-plain-pod.yaml": {"refused": "spec.schedulingGroup.podGroupName: Required value: a Pod goes with a "
                                        "Workload and its PodGroup"},
    # the Kubernetes website's Job pages
    "website-job-pi.yaml": {"pods": 1, "min": [], "requests": {}},
    "website-job-indexed.yaml": {"pods": 3, "min": [], "requests": {"cpu": "3"}},
    "website-job-pod-failure-policy.yaml": {"pods": 3, "min": [], "requests": {}},
    "website-job-success-policy.yaml": {"pods": 10, "min": [], "requests": {}},
    "website-job-backoff-per-index.yaml": {"pods": 4, "min": [], "requests": {}},
    "website-job-sidecar.yaml": {"pods": 1, "min": [], "requests": {"cpu": "750m", "memory": "192Mi"}},
    "website-cronjob.yaml": {"refused": "batch/v1 CronJob every-minute: cannot be converted"},
    "website-job-indexed-volume.yaml": {"pods": 3, "min": [], "requests": {}},
    "website-job-work-queue.yaml": {"pods": 2, "min": [], "requests": {}},
    "website-job-template.yaml": {"refused": "Job handle-item-$ITEM: metadata.name:"},
    # KEP-5547
    "kep5547-gang-zone.yaml": {"pods": 4, "min": [4], "topology": [{"key": ZONE}], "requests": {"nvidia.com/gpu": "1"}},
    "kep5547-basic.yaml": {"pods": 10, "min": [], "requests": {}},
    "kep5547-cronjob.yaml": {"refused": "batch/v1 CronJob periodic-gang: cannot be converted"},
    "kep5547-compiled-objects.yaml": {"pods": 4, "min": [4], "topology": [{"key": ZONE}],
                                      "requests": {"nvidia.com/gpu": "1"}},
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


def tree(node: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, dict[str, Any], set[str]]]:
    """(the view's name, the body's entry, the view's names of the pod groups under it) of every pod
    group and CPG copy of a body, named as the server's view names them: a stamped entry's copies are
    `<name>-<i>`, and the children of a copy are prefixed `<copy>-`."""
    for kind in ("podGroups", "compositePodGroups"):
        for entry in node.get(kind, []):
            stamped = "count" in entry
            for i in range(entry.get("count", 1)):
                name = f"{prefix}{entry['name']}-{i}" if stamped else f"{prefix}{entry['name']}"
                if kind == "podGroups":
                    yield name, entry, {name}
                    continue
                inner = list(tree(entry, f"{name}-" if stamped else prefix))
                yield name, entry, {n for n, e, _ in inner if "pods" in e}
                yield from inner


@pytest.fixture(scope="module")
def inventory(server: str) -> Iterator[tuple[Client, dict[str, dict[str, str]]]]:
    """One cluster for the corpus: 8 nodes in 4 pools of 2 (2 blocks, 2 zones), each its own host, with
    CPUs, GPUs (also as DRA devices of class gpu.example.com), TPUs and a TPU topology label; the
    priority classes the corpus names. Each file's workloads are deleted after its checks."""
    with Client(server, cluster=f"corpus-{uuid.uuid4().hex[:8]}") as c:
        labels: dict[str, dict[str, str]] = {}
        for i in range(8):
            name = f"n{i}"
            labels[name] = {POOL: f"p{i // 2}", RACK: f"r{i // 2}", BLOCK: f"b{i // 4}", ZONE: f"z{i // 4}",
                            HOST: name, "cloud.example.com/tpu-topology": "4x4"}
            c.put_node(name, labels=labels[name], allocatable={
                "cpu": "32", "memory": "256Gi", "pods": 110, "nvidia.com/gpu": "8", "example.com/gpu": "8",
                "google.com/tpu": "8"})
            c.put_resource_slice(f"{name}-gpus", {"driver": "gpu.example.com", "pool": {"name": name, "generation": 1},
                                                  "nodeName": name, "devices": [{"name": f"gpu-{d}"} for d in range(4)]})
        c.put_device_class("gpu.example.com", {"selectors": [{"cel": {"expression":
                                                                      "device.driver == 'gpu.example.com'"}}]})
        c.put_priority_class("high-priority", value=1_000_000)
        c.put_priority_class("low-priority", value=10)
        yield c, labels


def test_every_file_has_its_origin_and_an_expectation():
    files = sorted(p.name for p in CORPUS.glob("*.yaml"))
    assert len(files) >= 50
    assert files == sorted(ORIGINS) == sorted(EXPECTED)
    for origin in ORIGINS.values():
        assert origin["repository"] and origin["path"] and len(origin["commit"]) == 40, origin


def _stage_lines(result: Conversion) -> list[str]:
    return [s.line.removeprefix("staged: ") for s in result.stages]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file(name: str, inventory: tuple[Client, dict[str, dict[str, str]]]) -> None:
    expected = EXPECTED[name]
    text = (CORPUS / name).read_text()
    if "refused" in expected:
        with pytest.raises(ManifestError) as exc:
            convert(text)
        assert len(str(exc.value).splitlines()) == 1 and expected["refused"] in str(exc.value)
        return
    result = convert(text)
    bodies = [b for _, b in result.workloads] + [s.body for s in result.stages]
    assert "_from" not in json.dumps(bodies)  # the converter's notes of origin never reach a body
    got = facts(bodies)
    assert got["pods"] == expected.get("pods", 0), got
    assert got["min"] == expected.get("min", []), got
    assert got["topology"] == expected.get("topology", []), got
    if "requests" in expected:
        assert got["requests"] == expected["requests"], got
    assert _stage_lines(result) == expected.get("stages", [])
    assert len(result.warnings) == expected.get("warnings", 0), result.warnings
    assert len(result.skipped) == expected.get("skipped", 0), result.skipped
    if expected.get("grouped"):  # Kueue's pod set annotations on the groups they name, and the shared domain
        (copy,) = result.workloads[0][1]["compositePodGroups"]
        assert copy["topology"] == {"key": RACK} and all(g["topology"] == {"key": RACK} for g in copy["podGroups"])
    c, labels = inventory
    if "server" in expected:
        _refused_by_server(c, result, *expected["server"])
        return
    submitted, domains_kept = [], 0
    try:
        for ns, body in result.workloads:
            submitted.append((ns, body["name"]))
            domains_kept += _placed(c.submit(ns, body), body, labels)
        for stage in result.stages:
            _reach(c, stage)
            submitted.append((stage.namespace, stage.body["name"]))
            domains_kept += _placed(c.submit(stage.namespace, stage.body), stage.body, labels)
    finally:
        for ns, workload in reversed(submitted):
            c.delete_workload(ns, workload)
    assert (domains_kept > 0) == bool(expected.get("topology")), domains_kept  # the topology check ran


def _refused_by_server(c: Client, result: Conversion, field: str, manifest_path: str) -> None:
    (ns, body), = result.workloads
    with pytest.raises(ProblemError) as refused:
        c.submit(ns, body)
    assert refused.value.status == 422 and field in str(refused.value)
    line = result.refusal(ns, body["name"], refused.value)
    assert len(line.splitlines()) == 1 and manifest_path in line, line


def _placed(view: Any, body: dict[str, Any], labels: dict[str, dict[str, str]]) -> int:
    """Scheduled, every pod on a node, and every topology domain of the body kept: the pods under a
    group or CPG copy with a topology key all on nodes with one value of it."""
    groups = {g.name: g for g in view.status.pod_groups}
    assert view.status.phase == "Scheduled" and all(p.node for g in groups.values() for p in g.pods), view.status
    entries = list(tree(body))
    assert {n for n, e, _ in entries if "pods" in e} == set(groups), sorted(groups)
    kept = 0
    for holder, entry, members in entries:
        if "topology" in entry:
            values = {labels[p.node][entry["topology"]["key"]] for g in members for p in groups[g].pods}
            assert len(values) == 1, (holder, entry["topology"], values)
            kept += 1
    return kept


def _reach(c: Client, stage: Any) -> None:
    """What the stage waits for: `Ready` holds once its jobs are placed; `Complete` once their pods are
    reported Succeeded (as a job controller reports them)."""
    for wait in stage.waits_for:
        view = c.get_workload(wait.namespace, wait.workload)
        if wait.condition == "Complete":
            assert not wait.reached(view)
            pods = [{"podGroup": g.name, "name": p.name, "phase": "Succeeded"} for g in view.status.pod_groups
                    if any(g.name == rj or g.name.startswith(f"{rj}-") for rj in wait.replicated_jobs) for p in g.pods]
            view = c.finish_pods(wait.namespace, wait.workload, pods)
        assert wait.reached(view), (stage.line, view.status)
