"""The converter's remaining rules (client.md, *Manifests as users keep them*): every refusal of a
converted body, the client's own checks and a server's 422, named at the manifest's path; Kueue's pod
set annotations on the groups they name; LWS `volumeClaimTemplates` a warning; a claim template that no
workload uses said; what a stage waits for, read from a workload's view."""
from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest

from gangplank_client import Client, FieldError, ProblemError
from gangplank_client.kube import ManifestError, Wait, convert

C = '{containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}'
RACK = "example.com/rack"


def y(text: str) -> str:
    return textwrap.dedent(text).replace("$C", C)


BIG = y("""\
    apiVersion: jobset.x-k8s.io/v1alpha2
    kind: JobSet
    metadata: {name: big}
    spec:
      replicatedJobs:
      - name: workers
        replicas: 5000
        template: {spec: {parallelism: 2, template: {spec: $C}}}
    """)
EXCLUSIVE = y("""\
    apiVersion: jobset.x-k8s.io/v1alpha2
    kind: JobSet
    metadata: {name: pools, annotations: {alpha.jobset.sigs.k8s.io/exclusive-topology: example.com/pool}}
    spec:
      replicatedJobs:
      - name: workers
        replicas: 2
        template: {spec: {parallelism: 2, template: {spec: $C}}}
    """)


def test_a_check_of_the_converted_body_names_the_manifest_path():
    with pytest.raises(ManifestError) as caught:
        convert(BIG)
    assert str(caught.value).startswith("JobSet big: spec.replicatedJobs[0].replicas: ")
    assert "converted workload" not in str(caught.value)


def test_a_server_refusal_is_named_at_the_manifest_path():
    result = convert(EXCLUSIVE)
    (ns, body), = result.workloads
    loc = ("body", "compositePodGroups", 0, "podGroups", 0, "topology", "exclusive")
    assert result.locate(ns, "pools", loc) == (
        "JobSet pools: metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology] "
        "(the converted workload's compositePodGroups.0.podGroups.0.topology.exclusive)")
    count = ("body", "compositePodGroups", 0, "podGroups", 0, "count")
    assert result.locate(ns, "pools", count) == "JobSet pools: spec.replicatedJobs[0].replicas"
    pods = ("body", "compositePodGroups", 0, "podGroups", 0, "pods", 0, "requests", "cpu")
    assert result.locate(ns, "pools", pods).startswith(
        "JobSet pools: spec.replicatedJobs[0].template.spec.template.spec.containers (")
    problem = ProblemError(422, "Unprocessable Content", "invalid", errors=[FieldError(loc, "Extra inputs")])
    assert result.refusal(ns, "pools", problem) == (
        "JobSet pools: metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology] (the converted "
        "workload's compositePodGroups.0.podGroups.0.topology.exclusive): Extra inputs")
    assert result.refusal(ns, "other", problem) == str(problem)  # not converted here: as the server said it


def test_the_real_server_refusal_maps_back(server, cluster):
    result = convert(EXCLUSIVE)
    (ns, body), = result.workloads
    with Client(server, cluster=cluster) as c, pytest.raises(ProblemError) as refused:
        c.submit(ns, body)
    line = result.refusal(ns, body["name"], refused.value)
    assert refused.value.status == 422 and len(line.splitlines()) == 1
    assert line.startswith("JobSet pools: metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]")


def _lws(annotations: str) -> str:
    return y(f"""\
        apiVersion: leaderworkerset.x-k8s.io/v1
        kind: LeaderWorkerSet
        metadata: {{name: web}}
        spec:
          replicas: 2
          leaderWorkerTemplate:
            size: 3
            leaderTemplate: {{metadata: {{annotations: {{{annotations}}}}}, spec: $C}}
            workerTemplate: {{metadata: {{annotations: {{{annotations}}}}}, spec: $C}}
        """)


def test_kueue_annotations_go_on_the_groups_they_name():
    (_, body), = convert(_lws(f"kueue.x-k8s.io/podset-required-topology: {RACK}")).workloads
    (copy,) = body["compositePodGroups"]
    assert "topology" not in copy  # each pod set in a rack, not necessarily the same one
    assert [g.get("topology") for g in copy["podGroups"]] == [{"key": RACK}, {"key": RACK}]
    grouped = f"kueue.x-k8s.io/podset-required-topology: {RACK}, kueue.x-k8s.io/podset-group-name: g"
    (_, body), = convert(_lws(grouped)).workloads
    (copy,) = body["compositePodGroups"]
    assert copy["topology"] == {"key": RACK}  # one shared rack for the leader and its workers
    assert [g.get("topology") for g in copy["podGroups"]] == [{"key": RACK}, {"key": RACK}]


def test_lws_volume_claim_templates_are_a_warning():
    text = y("""\
        apiVersion: leaderworkerset.x-k8s.io/v1
        kind: LeaderWorkerSet
        metadata: {name: disks}
        spec:
          leaderWorkerTemplate:
            size: 2
            volumeClaimTemplates: [{metadata: {name: cache}}]
            workerTemplate: {spec: $C}
        """)
    assert convert(text).warnings == [
        "warning: LeaderWorkerSet disks: spec.leaderWorkerTemplate.volumeClaimTemplates[0]: storage is not "
        "modelled; a volume bound to a zone is not enforced"]


def test_a_claim_template_no_workload_uses_is_said():
    text = y("""\
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaimTemplate
        metadata: {name: gpu}
        spec: {spec: {devices: {requests: [{name: g, exactly: {deviceClassName: gpu.example.com}}]}}}
        """)
    result = convert(text)
    assert result.workloads == [] and result.skipped == ["skipped: ResourceClaimTemplate gpu (used by no workload)"]
    job = y("""\
        ---
        apiVersion: batch/v1
        kind: Job
        metadata: {name: j}
        spec:
          template:
            spec:
              resourceClaims: [{name: g, resourceClaimTemplateName: gpu}]
              containers: [{name: c, image: x, resources: {claims: [{name: g}]}}]
        """)
    assert convert(text + job).skipped == []


def _view(groups: dict[str, list[tuple[str | None, str]]]) -> SimpleNamespace:
    return SimpleNamespace(status=SimpleNamespace(pod_groups=[
        SimpleNamespace(name=name, pods=[SimpleNamespace(node=node, phase=phase) for node, phase in pods])
        for name, pods in groups.items()]))


def test_a_wait_is_reached_from_the_view():
    ready, complete = Wait("ns", "demo", ("driver",), "Ready"), Wait("ns", "demo", ("driver",), "Complete")
    placed = _view({"driver-0": [("n1", "Running")], "workers-0": [(None, "Pending")]})
    assert ready.reached(placed) and not complete.reached(placed)
    done = _view({"driver-0": [("n1", "Succeeded")], "workers-0": [(None, "Pending")]})
    assert complete.reached(done)
    assert not ready.reached(_view({"driver-0": [(None, "Pending")]}))
    assert not ready.reached(_view({"workers-0": [("n1", "Running")]}))  # nothing of the driver: not reached


def test_submit_names_the_manifest_path_of_a_server_refusal(server, cluster, tmp_path):
    from typer.testing import CliRunner

    from service.cli.main import app

    (tmp_path / "pools.yaml").write_text(EXCLUSIVE)
    result = CliRunner().invoke(app, ["submit", "-f", str(tmp_path / "pools.yaml")],
                                env={"GANGPLANK_SERVER": server, "GANGPLANK_CLUSTER": cluster})
    assert result.exit_code == 1
    assert "JobSet pools: metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]" in result.output
