"""Everyday use, as kubectl users expect it (client.md): apply -f of the cluster's own objects, many files
as one input applied object by object with named failures, kubectl's names and flags, reasons in words,
and failing fast; against a running server."""
from __future__ import annotations

import json
import textwrap
import threading
import time

import yaml
from typer.testing import CliRunner

from gangplank_client import Client
from service.cli.main import app

runner = CliRunner()

# what `kubectl get nodes -o yaml` prints (a List; fields Gangplank does not read included)
NODES = textwrap.dedent("""\
    apiVersion: v1
    kind: List
    items:
    - apiVersion: v1
      kind: Node
      metadata:
        name: n1
        labels: {kubernetes.io/hostname: n1, example.com/rack: r1}
        creationTimestamp: "2026-01-01T00:00:00Z"
      spec:
        podCIDR: 10.0.0.0/24
        taints: [{key: dedicated, value: gpu, effect: NoSchedule, timeAdded: null}]
      status:
        allocatable: {cpu: "8", memory: 32Gi, pods: "110", nvidia.com/gpu: "4", ephemeral-storage: 100Gi}
        capacity: {cpu: "8"}
        conditions: [{type: Ready, status: "True"}]
    - apiVersion: v1
      kind: Node
      metadata: {name: n2, labels: {example.com/rack: r2}}
      spec: {unschedulable: true}
      status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
    metadata: {resourceVersion: ""}
    """)

CLUSTER_OBJECTS = textwrap.dedent("""\
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: high}
    value: 1000
    preemptionPolicy: PreemptLowerPriority
    description: important
    ---
    apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu.example.com}
    spec:
      selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
    ---
    apiVersion: resource.k8s.io/v1
    kind: ResourceSlice
    metadata: {name: n1-gpus}
    spec:
      driver: gpu.example.com
      pool: {name: n1, generation: 1, resourceSliceCount: 1}
      nodeName: n1
      devices:
      - {name: gpu-0, attributes: {model: {string: H100}}}
      - {name: gpu-1, attributes: {model: {string: H100}}}
    """)


def job(name: str, *, cpu: str = "1", count: int = 1, priority_class: str | None = None,
        claim_template: str | None = None, namespace: str = "team-a") -> str:
    pod: dict = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    if priority_class:
        pod["priorityClassName"] = priority_class
    if claim_template:
        pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim_template}]
    return yaml.safe_dump({"apiVersion": "batch/v1", "kind": "Job",
                           "metadata": {"name": name, "namespace": namespace},
                           "spec": {"parallelism": count, "template": {"spec": pod}}})


def claim_template(name: str, device_class: str) -> str:
    return yaml.safe_dump({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                           "metadata": {"name": name, "namespace": "team-a"},
                           "spec": {"spec": {"devices": {"requests": [
                               {"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}}})


def run(*args: str, env: dict | None = None, stdin: str | None = None):
    return runner.invoke(app, list(args), env=env, input=stdin)


def test_apply_loads_a_clusters_nodes_and_objects(server, cluster, tmp_path):
    env = {"GANGPLANK_SERVER": server, "GANGPLANK_CLUSTER": cluster}
    first = run("apply", "-f", "-", env=env, stdin=NODES)
    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines() == ["node/n1 created", "node/n2 created"]
    (tmp_path / "objects.yaml").write_text(CLUSTER_OBJECTS)
    objects = run("apply", "-f", str(tmp_path / "objects.yaml"), env=env)
    assert objects.exit_code == 0, objects.output
    assert objects.stdout.splitlines() == ["priorityclass/high created", "deviceclass/gpu.example.com created",
                                           "resourceslice/n1-gpus created"]
    assert run("apply", "-f", "-", env=env, stdin=NODES).stdout.splitlines() == ["node/n1 configured",
                                                                                 "node/n2 configured"]
    with Client(server, cluster=cluster) as c:
        n1, n2 = c.get_node("n1"), c.get_node("n2")
        assert n1.allocatable["nvidia.com/gpu"] == "4" and n1.labels["example.com/rack"] == "r1"
        assert [(t.key, t.value, t.effect) for t in n1.taints] == [("dedicated", "gpu", "NoSchedule")]
        assert n2.unschedulable is True and c.get_priority_class("high").value == 1000
        assert [d["name"] for d in c.get_resource_slice("n1-gpus").devices] == ["gpu-0", "gpu-1"]

    nodes = run("get", "nodes", env=env).stdout.splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "PODS", "CPU", "MEMORY", "GPU", "DEVICES"]
    assert nodes[1].split() == ["n1", "Ready", "0", "0/8", "0/32Gi", "0/4", "0/2"]
    assert nodes[2].split()[:2] == ["n2", "SchedulingDisabled"]
    wide = run("get", "nodes", "-o", "wide", env=env).stdout.splitlines()
    assert "nvidia.com/gpu=0/4" in wide[1] and "dedicated=gpu:NoSchedule" in wide[1]
    assert [line.split()[0] for line in run("get", "node", "-l", "example.com/rack=r2", env=env).stdout.splitlines()] \
        == ["NAME", "n2"]
    assert run("get", "priorityclasses", env=env).stdout.splitlines()[1].split() == ["high", "1000",
                                                                                    "PreemptLowerPriority"]
    assert run("get", "deviceclasses", env=env).stdout.splitlines()[1].split() == ["gpu.example.com", "1"]
    assert run("get", "resourceslices", env=env).stdout.splitlines()[1].split() == \
        ["n1-gpus", "gpu.example.com", "n1", "n1", "0/2"]
    described = run("describe", "node", "n1", env=env).stdout
    assert "Devices:        (0/2 allocated)" in described and "gpu.example.com/n1/gpu-0" in described
    clusters = run("get", "clusters", "--server", server).stdout.splitlines()
    assert clusters[0].split() == ["NAME", "LAST", "POSITION"] and any(r.split()[0] == cluster for r in clusters)

    # delete -f removes what the files give (priority classes stay)
    gone = run("delete", "-f", str(tmp_path / "objects.yaml"), env=env)
    assert gone.exit_code == 0, gone.output
    assert gone.stdout.splitlines() == ["priorityclass/high kept (priority classes are not removed)",
                                        "deviceclass/gpu.example.com deleted", "resourceslice/n1-gpus deleted"]


def test_many_files_are_one_input_applied_object_by_object(server, cluster, tmp_path):
    env = {"GANGPLANK_SERVER": server, "GANGPLANK_CLUSTER": cluster}
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "a-priority.yaml").write_text(CLUSTER_OBJECTS.split("---")[0])  # used by a job in another file
    (folder / "b-job.yaml").write_text(job("urgent", priority_class="high"))
    (folder / "c-deployment.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
         "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}))
    (folder / "d-broken.yaml").write_text("a: b: c")
    (folder / "e-template.yaml").write_text(claim_template("one-gpu", "missing.example.com"))
    (folder / "f-dra-job.yaml").write_text(job("dra", claim_template="one-gpu"))
    (folder / "g-unknown-class.yaml").write_text(job("nope", priority_class="absent"))
    (folder / "h-job.yaml").write_text(job("last"))
    applied = run("apply", "-f", str(folder), env=env)
    assert applied.exit_code == 2, applied.output  # the worst: input that cannot be converted
    out = applied.stdout.splitlines()
    assert out[0] == "priorityclass/high created"
    assert "team-a/urgent Scheduled (1/1 pods)" in out and "team-a/last Scheduled (1/1 pods)" in out
    dra = next(line for line in out if line.startswith("team-a/dra "))
    assert dra.startswith("team-a/dra Pending (0/1 pods): ") and "DeviceClassNotFound: class missing.example.com" in dra
    errors = applied.stderr.splitlines()
    assert any(e.startswith(f"error: {folder / 'c-deployment.yaml'}: apps/v1 Deployment web: cannot be converted")
               for e in errors), errors
    assert any(e.startswith(f"error: {folder / 'd-broken.yaml'}: ") for e in errors), errors
    assert any(e.startswith(f"error: {folder / 'g-unknown-class.yaml'}: workload team-a/nope: 422")
               and "absent" in e for e in errors), applied.output
    described = run("describe", "workload", "dra", "-n", "team-a", env=env)
    assert described.exit_code == 0, described.output
    assert "DeviceClassNotFound: class missing.example.com" in described.stdout
    # only the server's refusals: exit 1
    refused = run("submit", "-f", str(folder / "g-unknown-class.yaml"), "-f", str(folder / "h-job.yaml"), env=env)
    assert refused.exit_code == 1 and refused.stdout.strip() == "team-a/last unchanged", refused.output


def test_kubectls_names_and_flags(server, cluster, tmp_path):
    env = {"GANGPLANK_SERVER": server, "GANGPLANK_CLUSTER": cluster}
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "4"})
        c.put_priority_class("urgent", value=1000)
    (tmp_path / "low.yaml").write_text(job("low", cpu="2", count=2))
    assert run("submit", "-f", str(tmp_path / "low.yaml"), env=env).exit_code == 0
    (tmp_path / "gone.yaml").write_text(job("gone", namespace="team-b"))
    assert run("submit", "-f", str(tmp_path / "gone.yaml"), env=env).exit_code == 0
    assert run("delete", "workload", "gone", "-n", "team-b", env=env).stdout.strip() == "workload team-b/gone deleted"
    listed = run("get", "workload", env=env).stdout.splitlines()  # live ones only
    assert [line.split()[1] for line in listed] == ["NAME", "low"]
    everything = run("get", "wl", "-a", env=env).stdout.splitlines()
    assert [line.split()[1] for line in everything] == ["NAME", "low", "gone"]
    one = run("get", "workloads", "gone", env=env).stdout.splitlines()
    assert len(one) == 2 and one[1].split()[:4] == ["team-b", "gone", "0", "Finished"]
    assert run("get", "workloads", "nothing", env=env).exit_code == 1
    wide = run("get", "workloads", "-o", "wide", env=env).stdout.splitlines()
    assert wide[0].split()[-2:] == ["NODES", "WAITING"] and wide[1].split()[-2:] == ["n1", "<none>"]
    assert json.loads(run("get", "workloads", "low", "-o", "json", env=env).stdout)["items"][0]["name"] == "low"

    # -w: the table, then each row again as it changes
    from gangplank_client.kube import to_workload

    def later() -> None:  # while the table is watched (not through the CLI: its runner owns stdout)
        time.sleep(1.5)
        with Client(server, cluster=cluster) as c:
            c.submit(*to_workload(job("urgent", cpu="4", priority_class="urgent")))

    t = threading.Thread(target=later)
    t.start()
    watched = run("get", "workloads", "-w", "--watch-timeout", "5", env=env)
    t.join()
    rows = [line.split() for line in watched.stdout.splitlines()]
    assert rows[0][:2] == ["NAMESPACE", "NAME"] and rows[1][1] == "low" and rows[1][3] == "Scheduled"
    assert ["low", "Pending"] in [[r[1], r[3]] for r in rows[2:]] and "urgent" in [r[1] for r in rows[2:]]

    # a preemption in words, never JSON
    described = run("describe", "workload", "low", "-n", "team-a", env=env).stdout
    assert "preempted by team-a/urgent group job (priority 1000)" in described and '{"' not in described
    assert run("describe", "team-a/low", "-n", "team-b", env=env).exit_code == 2


def test_a_refused_connection_fails_fast():
    started = time.monotonic()
    down = run("get", "workloads", "--server", "http://127.0.0.1:9")
    assert down.exit_code == 3 and "cannot reach http://127.0.0.1:9" in down.output
    assert time.monotonic() - started < 1.5
