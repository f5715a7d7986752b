"""kube.to_workload: manifests built by the official Kubernetes Python client (release-1.37 models,
serialised by its ApiClient) and written by hand in YAML."""
from __future__ import annotations

import textwrap

import pytest
from kubernetes import client as k

from gangplank_client.kube import to_workload

api = k.ApiClient()


def ser(obj) -> dict:
    return api.sanitize_for_serialization(obj)


def container(name="main", requests=None, limits=None, restart_policy=None, ports=None) -> k.V1Container:
    return k.V1Container(name=name, image="busybox", restart_policy=restart_policy, ports=ports,
                         resources=k.V1ResourceRequirements(requests=requests, limits=limits))


def pod_spec(**kw) -> k.V1PodSpec:
    kw.setdefault("containers", [container(requests={"cpu": "1"})])
    return k.V1PodSpec(**kw)


def job(name="train", parallelism=4, spec=None, scheduling=None, namespace="team-a", **job_kw) -> dict:
    return ser(k.V1Job(api_version="batch/v1", kind="Job", metadata=k.V1ObjectMeta(name=name, namespace=namespace),
                       spec=k.V1JobSpec(parallelism=parallelism, scheduling=scheduling,
                                        template=k.V1PodTemplateSpec(spec=spec or pod_spec()), **job_kw)))


def requests_of(body: dict) -> dict:
    return body["podGroups"][0]["pods"][0]["requests"]


def test_job_without_scheduling_is_one_basic_group():
    ns, body = to_workload(job(spec=pod_spec(node_selector={"pool": "a"}, priority_class_name="high")))
    assert ns == "team-a"
    assert body == {"name": "train", "priorityClassName": "high", "podGroups": [
        {"name": "job", "schedulingPolicy": {"basic": {}},
         "pods": [{"name": "train", "count": 4, "requests": {"cpu": "1"}, "nodeSelector": {"pool": "a"}}]}]}


def test_job_scheduling_kep_5547_maps_to_the_group():
    scheduling = k.V1JobSchedulingConfiguration(
        scheduling_policy=k.V1alpha3WorkloadPodGroupSchedulingPolicy(
            gang=k.V1alpha3WorkloadPodGroupGangSchedulingPolicy()),
        scheduling_constraints=k.V1alpha3WorkloadPodGroupSchedulingConstraints(
            topology=[k.V1alpha3TopologyConstraint(key="example.com/rack")]),
        disruption_mode=k.V1alpha3WorkloadPodGroupDisruptionMode(all={}),
        resource_claims=[k.V1alpha3WorkloadPodGroupResourceClaim(name="fabric", resource_claim_template_name="fab")])
    tmpl = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "fab"},
            "spec": {"spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "nic"}}]}}}}
    _, body = to_workload([job(parallelism=3, scheduling=scheduling), tmpl])
    group = body["podGroups"][0]
    assert group["schedulingPolicy"] == {"gang": {"minCount": 3}}  # minCount defaults to parallelism
    assert group["topology"] == {"key": "example.com/rack"} and group["disruptionMode"] == "All"
    assert group["resourceClaims"] == [{"name": "fabric", "resourceClaimTemplateName": "fab"}]
    assert body["resourceClaimTemplates"] == [
        {"name": "fab", "spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "nic"}}]}}}]
    scheduling.scheduling_policy.gang.min_count = 2
    assert to_workload([job(scheduling=scheduling, completions=2), tmpl])[1]["podGroups"][0]["pods"][0]["count"] == 2


def test_effective_requests_as_kubernetes_computes_them():
    spec = pod_spec(
        containers=[container(requests={"cpu": "500m", "memory": "1Gi"}, limits={"example.com/gpu": "2"}),
                    container("b", requests={"cpu": "250m"})],
        init_containers=[container("sidecar", requests={"cpu": "250m", "memory": "256Mi"}, restart_policy="Always"),
                         container("setup", requests={"cpu": "2", "memory": "100Mi"}),
                         container("late-sidecar", requests={"cpu": "100m"}, restart_policy="Always")],
        overhead={"cpu": "50m", "memory": "64Mi"})
    # containers 750m + sidecars 350m = 1100m; init peak: setup 2 + the sidecar before it 250m = 2250m
    # memory: containers 1Gi + sidecar 256Mi vs setup 100Mi + 256Mi; then overhead
    assert requests_of(to_workload(job(spec=spec))[1]) == {
        "cpu": "2300m", "memory": "1344Mi", "example.com/gpu": "2"}


def test_sidecars_alone_can_be_the_peak():
    spec = pod_spec(containers=[container(requests={"cpu": "100m"})],
                    init_containers=[container("s1", requests={"cpu": "1"}, restart_policy="Always"),
                                     container("s2", requests={"cpu": "1"}, restart_policy="Always")])
    assert requests_of(to_workload(job(spec=spec))[1]) == {"cpu": "2100m"}


def test_pod_level_resources_and_rounding_up():
    spec = pod_spec(containers=[container(requests={"cpu": "8", "memory": "1.5", "example.com/nic": "1"})],
                    resources=k.V1ResourceRequirements(requests={"cpu": "4"}))
    assert requests_of(to_workload(job(spec=spec))[1]) == {"cpu": "4", "example.com/nic": "1", "memory": "2"}
    spec = pod_spec(containers=[container(requests={"cpu": "0.1m"})])
    assert requests_of(to_workload(job(spec=spec))[1]) == {"cpu": "1m"}  # MilliValue rounds up


def test_tolerations_and_node_affinity_are_kept():
    affinity = k.V1Affinity(node_affinity=k.V1NodeAffinity(
        required_during_scheduling_ignored_during_execution=k.V1NodeSelector(node_selector_terms=[
            k.V1NodeSelectorTerm(match_expressions=[k.V1NodeSelectorRequirement(
                key="example.com/gpu-model", operator="In", values=["H100"])])]),
        preferred_during_scheduling_ignored_during_execution=[k.V1PreferredSchedulingTerm(
            weight=50, preference=k.V1NodeSelectorTerm(match_expressions=[k.V1NodeSelectorRequirement(
                key="pool", operator="Exists")]))]))
    spec = pod_spec(affinity=affinity, tolerations=[k.V1Toleration(key="nvidia.com/gpu", operator="Exists",
                                                                   effect="NoSchedule")])
    entry = to_workload(job(spec=spec))[1]["podGroups"][0]["pods"][0]
    assert entry["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert entry["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "example.com/gpu-model", "operator": "In",
                                                     "values": ["H100"]}]}]}
    assert entry["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 50


def test_fields_that_cannot_be_honoured_are_named():
    spec = pod_spec(
        containers=[container(requests={"cpu": "1"}, ports=[k.V1ContainerPort(container_port=80, host_port=8080)])],
        affinity=k.V1Affinity(pod_anti_affinity=k.V1PodAntiAffinity(
            required_during_scheduling_ignored_during_execution=[k.V1PodAffinityTerm(topology_key="kubernetes.io/hostname")])),
        topology_spread_constraints=[k.V1TopologySpreadConstraint(max_skew=1, topology_key="zone",
                                                                   when_unsatisfiable="DoNotSchedule")],
        tolerations=[k.V1Toleration(key="x", operator="Exists", effect="NoExecute", toleration_seconds=30)],
        volumes=[k.V1Volume(name="data", persistent_volume_claim=k.V1PersistentVolumeClaimVolumeSource(claim_name="d"))],
        resource_claims=[k.V1PodResourceClaim(name="gpu", resource_claim_name="existing")])
    with pytest.raises(ValueError) as exc:
        to_workload(job(spec=spec))
    text = str(exc.value)
    for field in ("spec.template.spec.affinity.podAntiAffinity", "spec.template.spec.topologySpreadConstraints",
                  "spec.template.spec.tolerations[0].tolerationSeconds",
                  "spec.template.spec.containers[0].ports[0].hostPort",
                  "spec.template.spec.resourceClaims[0].resourceClaimName"):
        assert field in text, field
    assert text.startswith("Job train: ")


def test_names_and_namespaces_are_checked():
    with pytest.raises(ValueError, match="metadata.name"):
        to_workload(job(name="has.dots"))
    with pytest.raises(ValueError, match="does not match"):
        to_workload(job(), namespace="team-b")
    assert to_workload(job(namespace=None))[0] == "default"
    assert to_workload(job(namespace=None), namespace="team-b")[0] == "team-b"
    with pytest.raises(ValueError, match="apps/v1 Deployment d: cannot be converted"):
        to_workload({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}})
    with pytest.raises(ValueError, match="minCount"):  # the builder's checks run on the result
        to_workload(job(parallelism=2, scheduling=k.V1JobSchedulingConfiguration(
            scheduling_policy=k.V1alpha3WorkloadPodGroupSchedulingPolicy(
                gang=k.V1alpha3WorkloadPodGroupGangSchedulingPolicy(min_count=3)))))


JOBSET = textwrap.dedent("""\
    apiVersion: jobset.x-k8s.io/v1alpha2
    kind: JobSet
    metadata:
      name: trainer
      namespace: ml
      annotations:
        alpha.jobset.sigs.k8s.io/exclusive-topology: example.com/rack
    spec:
      replicatedJobs:
      - name: driver
        template:
          metadata:
            annotations:
              alpha.jobset.sigs.k8s.io/exclusive-topology: example.com/block
          spec:
            parallelism: 1
            template:
              spec:
                priorityClassName: high
                containers:
                - name: d
                  image: x
                  resources: {requests: {cpu: "1"}}
      - name: workers
        replicas: 3
        template:
          spec:
            parallelism: 4
            completions: 4
            template:
              spec:
                priorityClassName: high
                containers:
                - name: w
                  image: x
                  resources: {limits: {cpu: "8", example.com/gpu: "8"}}
    """)


def test_jobset_is_one_root_with_a_gang_per_replicated_job():
    ns, body = to_workload(JOBSET)
    assert ns == "ml"
    assert body == {"name": "trainer", "priorityClassName": "high", "compositePodGroups": [
        {"name": "trainer", "schedulingPolicy": {"gang": {"minGroupCount": 4}}, "podGroups": [
            {"name": "driver", "count": 1, "schedulingPolicy": {"gang": {"minCount": 1}},
             "topology": {"key": "example.com/block", "exclusive": True},
             "pods": [{"name": "driver", "count": 1, "requests": {"cpu": "1"}}]},
            {"name": "workers", "count": 3, "schedulingPolicy": {"gang": {"minCount": 4}},
             "topology": {"key": "example.com/rack", "exclusive": True},
             "pods": [{"name": "workers", "count": 4, "requests": {"cpu": "8", "example.com/gpu": "8"}}]}]}]}


def test_jobset_templates_must_agree_on_priority():
    with pytest.raises(ValueError, match=r"replicatedJobs\[1\].*priorityClassName.*a workload has one priority"):
        head, _, tail = JOBSET.rpartition("priorityClassName: high")
        to_workload(head + "priorityClassName: low" + tail)


def lws(size=4, leader=True, annotations=None) -> dict:
    worker = k.V1PodTemplateSpec(spec=pod_spec(containers=[container(requests={"cpu": "8"})]))
    lead = k.V1PodTemplateSpec(spec=pod_spec(containers=[container(requests={"cpu": "2"})])) if leader else None
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "serve", "annotations": annotations or {}},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": size, "workerTemplate": ser(worker),
                                                             **({"leaderTemplate": ser(lead)} if lead else {})}}}


def test_leaderworkerset_is_a_stamped_gang_of_leader_and_workers():
    _, body = to_workload(lws(annotations={"leaderworkerset.sigs.k8s.io/exclusive-topology": "example.com/rack"}))
    assert body == {"name": "serve", "compositePodGroups": [
        {"name": "serve", "count": 2, "schedulingPolicy": {"gang": {"minGroupCount": 2}}, "disruptionMode": "All",
         "topology": {"key": "example.com/rack", "exclusive": True}, "podGroups": [
             {"name": "leader", "schedulingPolicy": {"gang": {"minCount": 1}}, "disruptionMode": "All",
              "pods": [{"name": "leader", "count": 1, "requests": {"cpu": "2"}}]},
             {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}, "disruptionMode": "All",
              "pods": [{"name": "worker", "count": 3, "requests": {"cpu": "8"}}]}]}]}
    _, body = to_workload(lws(size=1, leader=False))
    copy = body["compositePodGroups"][0]
    assert copy["schedulingPolicy"] == {"gang": {"minGroupCount": 1}} and len(copy["podGroups"]) == 1
    assert copy["podGroups"][0]["pods"][0]["requests"] == {"cpu": "8"}  # the worker template leads
    with pytest.raises(ValueError, match="subgroup-exclusive-topology"):
        to_workload(lws(annotations={"leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology": "rack"}))


BUNDLE = textwrap.dedent("""\
    apiVersion: scheduling.k8s.io/v1beta1
    kind: Workload
    metadata: {name: llm, namespace: ml}
    spec:
      compositePodGroupTemplates:
      - name: replica
        schedulingPolicy: {gang: {minGroupCount: 2}}
        schedulingConstraints: {topology: [{key: example.com/rack}]}
        disruptionMode: {all: {}}
        podGroupTemplates:
        - {name: leader, schedulingPolicy: {gang: {minCount: 1}}, disruptionMode: {all: {}}}
        - {name: workers, schedulingPolicy: {gang: {minCount: 2}}, disruptionMode: {all: {}}}
    ---
    apiVersion: scheduling.k8s.io/v1alpha3
    kind: CompositePodGroup
    metadata: {name: replica-0, namespace: ml}
    spec: {workloadRef: {workloadName: llm, templateName: replica}, priorityClassName: high}
    ---
    apiVersion: scheduling.k8s.io/v1beta1
    kind: PodGroup
    metadata: {name: replica-0-leader, namespace: ml}
    spec: {workloadRef: {workloadName: llm, templateName: leader}, parentCompositePodGroupName: replica-0}
    ---
    apiVersion: scheduling.k8s.io/v1beta1
    kind: PodGroup
    metadata: {name: replica-0-workers, namespace: ml}
    spec: {workloadRef: {workloadName: llm, templateName: workers}, parentCompositePodGroupName: replica-0}
    """)


def pod(name: str, group: str, cpu: str = "4") -> str:
    return textwrap.dedent(f"""\
        ---
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}, namespace: ml}}
        spec:
          schedulingGroup: {{podGroupName: {group}}}
          containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
        """)


def test_scheduling_bundle_maps_one_to_one():
    text = BUNDLE + pod("leader-0", "replica-0-leader", "2") + pod("w-0", "replica-0-workers") \
        + pod("w-1", "replica-0-workers")
    ns, body = to_workload(text)
    assert ns == "ml"
    assert body == {"name": "llm", "priorityClassName": "high", "compositePodGroups": [
        {"name": "replica-0", "schedulingPolicy": {"gang": {"minGroupCount": 2}},
         "topology": {"key": "example.com/rack"}, "disruptionMode": "All", "podGroups": [
             {"name": "replica-0-leader", "schedulingPolicy": {"gang": {"minCount": 1}}, "disruptionMode": "All",
              "pods": [{"name": "leader", "count": 1, "requests": {"cpu": "2"}}]},
             {"name": "replica-0-workers", "schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": "All",
              "pods": [{"name": "w", "count": 2, "requests": {"cpu": "4"}}]}]}]}


def test_scheduling_bundle_of_python_client_objects_flat():
    wl = k.V1beta1Workload(api_version="scheduling.k8s.io/v1beta1", kind="Workload",
                           metadata=k.V1ObjectMeta(name="flat"), spec=k.V1beta1WorkloadSpec(pod_group_templates=[
                               k.V1beta1PodGroupTemplate(name="g", scheduling_policy=k.V1beta1PodGroupSchedulingPolicy(
                                   gang=k.V1beta1GangSchedulingPolicy(min_count=2)))]))
    pods = [k.V1Pod(api_version="v1", kind="Pod", metadata=k.V1ObjectMeta(name=f"p-{i}"),
                    spec=pod_spec(scheduling_group=k.V1PodSchedulingGroup(pod_group_name="g"))) for i in range(2)]
    odd = k.V1Pod(api_version="v1", kind="Pod", metadata=k.V1ObjectMeta(name="special"),
                  spec=pod_spec(scheduling_group=k.V1PodSchedulingGroup(pod_group_name="g")))
    _, body = to_workload({"apiVersion": "v1", "kind": "List", "items": [ser(o) for o in (wl, *pods, odd)]})
    assert body["podGroups"] == [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 2}}, "pods": [
        {"name": "p", "count": 2, "requests": {"cpu": "1"}}, {"name": "special", "count": 1, "requests": {"cpu": "1"}}]}]


def test_scheduling_bundle_refusals():
    with pytest.raises(ValueError) as exc:
        to_workload(BUNDLE + pod("x-0", "nowhere"))
    assert "Pod x-0: spec.schedulingGroup.podGroupName" in str(exc.value)
    assert "Workload llm has no pods" in str(exc.value)


def test_the_v1alpha3_spelling_of_workload_and_pod_group_reads_as_v1beta1():
    """client.md, *Everyday use*: the Kubernetes documentation's scheduling.k8s.io/v1alpha3 Workload and
    PodGroup (beside CompositePodGroup) are read like v1beta1."""
    text = BUNDLE + pod("leader-0", "replica-0-leader", "2") + pod("w-0", "replica-0-workers") \
        + pod("w-1", "replica-0-workers")
    alpha3 = text.replace("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3")
    assert "v1beta1" not in alpha3
    assert to_workload(alpha3) == to_workload(text)
