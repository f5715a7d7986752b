"""The converter's rules for manifests as users keep them (shared/spec/client.md)."""
from __future__ import annotations

import textwrap

import pytest

from gangplank_client.kube import ManifestError, convert, generated_name, to_workload

C = '{containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}'


def y(text: str) -> str:
    return textwrap.dedent(text).replace("$C", C)


def test_services_are_skipped_and_unsupported_kinds_refused_by_name():
    result = convert(y("""\
        apiVersion: v1
        kind: Service
        metadata: {name: vllm-leader}
        ---
        apiVersion: leaderworkerset.x-k8s.io/v1
        kind: LeaderWorkerSet
        metadata: {name: vllm}
        spec: {replicas: 1, leaderWorkerTemplate: {size: 2, workerTemplate: {spec: $C}}}
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: cfg}
        """))
    assert result.skipped == ["skipped: v1 Service vllm-leader", "skipped: v1 ConfigMap cfg"]
    assert [b["name"] for _, b in result.workloads] == ["vllm"]
    with pytest.raises(ManifestError, match=r"apps/v1 StatefulSet s: cannot be converted: Gangplank converts batch/v1 Job"):
        convert(y("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec: {template: {spec: $C}}"))


@pytest.mark.parametrize("text, error", [
    ("apiVersion: batch/v2\nkind: Job\nmetadata: {name: j}\nspec: {template: {spec: $C}}",
     "Job j: apiVersion: Unsupported value: 'batch/v2': Job is served as batch/v1"),
    ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {parallelism: 2}", "Job j: spec.template: Required value"),
    ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {parallelism: \"2\", template: {spec: $C}}",
     'Job j: spec.parallelism: Invalid value: "2": must be of type integer, not string'),
    ("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: training}\nspec:\n  replicatedJobs:\n"
     "  - template: {spec: {template: {spec: $C}}}", "JobSet training: spec.replicatedJobs[0].name: Required value"),
    ("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: training}\nspec:\n  replicatedJobs:\n"
     "  - {name: w, template: {spec: {parallelism: x, template: {spec: $C}}}}",
     "JobSet training: spec.replicatedJobs[0].template.spec.parallelism: Invalid value"),
])
def test_validation_names_the_object_and_the_manifest_path(text, error):
    with pytest.raises(ManifestError) as exc:
        convert(y(text))
    assert error in str(exc.value)


def test_generate_name_is_deterministic():
    text = y("apiVersion: batch/v1\nkind: Job\nmetadata: {generateName: sample-job-}\nspec: {template: {spec: $C}}")
    name = to_workload(text)[1]["name"]
    assert name == to_workload(text)[1]["name"] and name.startswith("sample-job-") and len(name) == 16
    assert set(name[-5:]) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert generated_name("x-", {"a": 1}) != generated_name("x-", {"a": 2})


def test_earlier_spellings_level_and_disruption_modes():
    _, body = to_workload(y("""\
        apiVersion: batch/v1
        kind: Job
        metadata: {name: j}
        spec:
          parallelism: 2
          scheduling:
            schedulingPolicy: {gang: {minCount: 2}}
            schedulingConstraints: {topology: [{level: example.com/rack}]}
            disruptionMode: PodGroup
          template: {spec: $C}
        """))
    group = body["podGroups"][0]
    assert group["topology"] == {"key": "example.com/rack"} and group["disruptionMode"] == "All"


def test_workload_podgroup_and_jobset_in_one_file():
    _, body = to_workload(y("""\
        apiVersion: scheduling.k8s.io/v1alpha2
        kind: Workload
        metadata: {name: js-abc}
        spec: {podGroupTemplates: [{name: workers, schedulingPolicy: {gang: {minCount: 6}}}]}
        ---
        apiVersion: scheduling.k8s.io/v1alpha2
        kind: PodGroup
        metadata: {name: js-abc-workers-def}
        spec:
          podGroupTemplateRef: {workload: {workloadName: js-abc, podGroupTemplateName: workers}}
          schedulingPolicy: {gang: {minCount: 6}}
          schedulingConstraints: {topology: [{key: example.com/rack}]}
        ---
        apiVersion: jobset.x-k8s.io/v1alpha2
        kind: JobSet
        metadata: {name: js}
        spec:
          replicatedJobs:
          - name: rj
            replicas: 3
            template:
              spec:
                parallelism: 2
                completions: 2
                template:
                  spec:
                    schedulingGroup: {podGroupName: js-abc-workers-def}
                    containers: [{name: w, image: x, resources: {requests: {cpu: "4"}}}]
        """))
    assert body == {"name": "js", "podGroups": [
        {"name": "js-abc-workers-def", "schedulingPolicy": {"gang": {"minCount": 6}},
         "topology": {"key": "example.com/rack"}, "pods": [{"name": "rj", "count": 6, "requests": {"cpu": "4"}}]}]}
    with pytest.raises(ManifestError, match=r"spec.template.spec.schedulingGroup.podGroupName: names PodGroup 'nope'"):
        convert(y("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n"
                  "      schedulingGroup: {podGroupName: nope}\n      containers: [{name: c, image: x}]"))


def test_kueue_topology_annotations_and_slices():
    _, body = to_workload(y("""\
        apiVersion: batch/v1
        kind: Job
        metadata: {name: j}
        spec:
          parallelism: 4
          template:
            metadata:
              annotations:
                kueue.x-k8s.io/podset-required-topology: example.com/block
                kueue.x-k8s.io/podset-slice-required-topology: example.com/rack
                kueue.x-k8s.io/podset-slice-size: "2"
            spec: $C
        """))
    assert body == {"name": "j", "compositePodGroups": [
        {"name": "job", "schedulingPolicy": {"gang": {"minGroupCount": 2}}, "topology": {"key": "example.com/block"},
         "podGroups": [{"name": "slice", "count": 2, "schedulingPolicy": {"gang": {"minCount": 2}},
                        "topology": {"key": "example.com/rack"},
                        "pods": [{"name": "j", "count": 2, "requests": {"cpu": "1"}}]}]}]}
    _, body = to_workload(y("""\
        apiVersion: batch/v1
        kind: Job
        metadata: {name: j}
        spec:
          template:
            metadata: {annotations: {kueue.x-k8s.io/podset-preferred-topology: example.com/rack}}
            spec: $C
        """))
    assert body["podGroups"][0]["topology"] == {"key": "example.com/rack", "mode": "Preferred"}


def test_jobset_start_order_is_stages_and_storage_a_warning():
    result = convert(y("""\
        apiVersion: jobset.x-k8s.io/v1alpha2
        kind: JobSet
        metadata: {name: demo, namespace: team-a}
        spec:
          volumeClaimPolicies: [{templates: [{metadata: {name: data}}]}]
          replicatedJobs:
          - {name: init, template: {spec: {template: {spec: $C}}}}
          - name: launcher
            dependsOn: [{name: init, status: Complete}]
            template: {spec: {template: {spec: $C}}}
          - name: workers
            dependsOn: [{name: launcher, status: Ready}]
            template: {spec: {parallelism: 4, template: {spec: $C}}}
        """))
    assert [b["name"] for _, b in result.workloads] == ["demo"]
    assert [s.line for s in result.stages] == [
        "staged: team-a/demo-launcher waits for team-a/demo (init Complete)",
        "staged: team-a/demo-workers waits for team-a/demo-launcher (launcher Ready)"]
    assert result.warnings == ["warning: JobSet demo: spec.volumeClaimPolicies[0]: storage is not modelled; "
                               "a volume bound to a zone is not enforced"]
    in_order = convert(y("""\
        apiVersion: jobset.x-k8s.io/v1alpha2
        kind: JobSet
        metadata: {name: io}
        spec:
          startupPolicy: {startupPolicyOrder: InOrder}
          replicatedJobs:
          - {name: a, template: {spec: {template: {spec: $C}}}}
          - {name: b, template: {spec: {template: {spec: $C}}}}
        """))
    assert [s.line for s in in_order.stages] == ["staged: default/io-b waits for default/io (a Ready)"]
    with pytest.raises(ManifestError, match="use convert"):
        to_workload(y("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: io}\nspec:\n"
                      "  startupPolicy: {startupPolicyOrder: InOrder}\n  replicatedJobs:\n"
                      "  - {name: a, template: {spec: {template: {spec: $C}}}}\n"
                      "  - {name: b, template: {spec: {template: {spec: $C}}}}"))


def test_pod_affinity_is_a_warning_only_when_asked():
    text = y("""\
        apiVersion: batch/v1
        kind: Job
        metadata: {name: j}
        spec:
          template:
            spec:
              affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: zone}]}}
              volumes: [{name: d, persistentVolumeClaim: {claimName: d}}]
              containers: [{name: c, image: x}]
        """)
    with pytest.raises(ManifestError, match="spec.template.spec.affinity.podAffinity"):
        convert(text)
    result = convert(text, ignore_unenforced=True)
    assert len(result.workloads) == 1 and len(result.warnings) == 2
    assert result.warnings[1].startswith("warning: Job j: spec.template.spec.volumes[0].persistentVolumeClaim: storage")


def test_nothing_raises_but_manifest_error():
    for text in ("[1]", "a: b: c", "kind: Job", "apiVersion: batch/v1\nkind: Job\nmetadata: 3",
                 "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: [1]",
                 "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: j}\nspec: {replicatedJobs: [3]}",
                 "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata: {name: l}\nspec: 5"):
        with pytest.raises(ManifestError):
            convert(text)
