"""gangplank_client.kube.to_objects (lifecycle.md): a scheduling.k8s.io Workload with the PodGroup objects
that name it and their Pods, as a workload of templates and PodGroup bodies; and a Job with completions
above its parallelism converted with its parallelism's pods."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gangplank_client.kube import ManifestError, to_objects, to_workload
from service.schemas import validate_body

CORPUS = Path(__file__).resolve().parents[1] / "manifests" / "corpus"

OBJECTS = textwrap.dedent("""\
    apiVersion: scheduling.k8s.io/v1beta1
    kind: Workload
    metadata: {name: train, namespace: team-a}
    spec:
      priorityClassName: high
      resourceClaims: [{name: dataset, resourceClaimTemplateName: dataset}]
      podGroupTemplates:
      - name: worker
        schedulingPolicy: {gang: {minCount: 2}}
        schedulingConstraints: {topology: [{key: example.com/rack}]}
        resourceClaims: [{name: nic, resourceClaimTemplateName: nic}]
    ---
    apiVersion: scheduling.k8s.io/v1beta1
    kind: PodGroup
    metadata: {name: train-1, namespace: team-a}
    spec:
      workloadRef: {workloadName: train, templateName: worker}
    ---
    apiVersion: scheduling.k8s.io/v1beta1
    kind: PodGroup
    metadata: {name: train-0, namespace: team-a}
    spec:
      workloadRef: {workloadName: train, templateName: worker}
      schedulingPolicy: {gang: {minCount: 1}}
    ---
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaimTemplate
    metadata: {name: nic}
    spec: {spec: {devices: {requests: [{name: n, exactly: {deviceClassName: nic}}]}}}
    ---
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaimTemplate
    metadata: {name: dataset}
    spec: {spec: {devices: {requests: [{name: d, exactly: {deviceClassName: nic}}]}}}
    """) + "".join(textwrap.dedent(f"""\
    ---
    apiVersion: v1
    kind: Pod
    metadata: {{name: {g}-w-{i}, namespace: team-a}}
    spec:
      schedulingGroup: {{podGroupName: {g}}}
      containers: [{{name: c, image: x, resources: {{requests: {{cpu: "2"}}}}}}]
    """) for g in ("train-0", "train-1") for i in range(2))


def test_a_workload_with_podgroup_objects_becomes_two_kinds_of_objects():
    ns, workload, podgroups = to_objects(OBJECTS)
    assert ns == "team-a"
    assert workload == {
        "name": "train", "priorityClassName": "high",
        "podGroupTemplates": [{"name": "worker", "schedulingPolicy": {"gang": {"minCount": 2}},
                               "topology": {"key": "example.com/rack"},
                               "resourceClaims": [{"name": "nic", "resourceClaimTemplateName": "nic"}]}],
        "resourceClaims": [{"name": "dataset", "resourceClaimTemplateName": "dataset"}],
        "resourceClaimTemplates": [
            {"name": "dataset", "spec": {"devices": {"requests": [{"name": "d", "exactly": {"deviceClassName": "nic"}}]}}},
            {"name": "nic", "spec": {"devices": {"requests": [{"name": "n", "exactly": {"deviceClassName": "nic"}}]}}}]}
    assert [p["name"] for p in podgroups] == ["train-1", "train-0"]  # in the order given
    assert podgroups[0] == {"name": "train-1", "workloadRef": {"workloadName": "train", "templateName": "worker"},
                            "pods": [{"name": "train-1-w", "count": 2, "requests": {"cpu": "2"}}]}
    assert podgroups[1]["schedulingPolicy"] == {"gang": {"minCount": 1}}
    validate_body("Workload", workload)
    for body in podgroups:
        validate_body("PodGroupObject", body)


def test_to_workload_of_the_same_manifests_still_embeds_the_groups():
    ns, body = to_workload(OBJECTS)
    assert [g["name"] for g in body["podGroups"]] == ["train-1", "train-0"]


def test_the_corpus_bundle_converts_both_ways():
    text = (CORPUS / "kep5547-compiled-objects.yaml").read_text()
    ns, workload, podgroups = to_objects(text)
    assert (ns, workload["podGroupTemplates"][0]["disruptionMode"]) == ("training", "All")
    assert podgroups[0]["pods"] == [{"name": "zonal", "count": 4, "requests": {"nvidia.com/gpu": "1"}}]


@pytest.mark.parametrize(("text", "words"), [
    (OBJECTS.replace("kind: PodGroup\nmetadata: {name: train-1", "kind: CompositePodGroup\nmetadata: {name: train-1"),
     "a tree is submitted whole"),
    (OBJECTS.replace("kind: Workload", "kind: Workload\n# two\n") + "---\n" + OBJECTS.split("---")[0]
     .replace("name: train,", "name: other,"), "2 Workloads"),
    (OBJECTS.replace("podGroupName: train-0}", "podGroupName: nope}"), "names no PodGroup"),
    (OBJECTS.replace("metadata: {name: nic}", "metadata: {name: nick}"), "no ResourceClaimTemplate 'nic'"),
])
def test_what_to_objects_refuses(text, words):
    with pytest.raises(ManifestError) as exc:
        to_objects(text)
    assert words in str(exc.value)


def test_a_job_with_completions_above_parallelism_gets_its_parallelism():
    ns, body = to_workload(textwrap.dedent("""\
        apiVersion: batch/v1
        kind: Job
        metadata: {name: pi}
        spec:
          completions: 6
          parallelism: 2
          template: {spec: {containers: [{name: c, image: x}]}}
        """))
    assert body["podGroups"][0]["pods"][0]["count"] == 2
    with pytest.raises(ValueError):
        to_objects("apiVersion: batch/v1\nkind: Job\nmetadata: {name: pi}\nspec: {}\n")
