"""`gangplank submit`, `get workloads` and `describe` against a running server."""
from __future__ import annotations

import json
import textwrap

from typer.testing import CliRunner

from gangplank_client import Client
from service.cli.main import app

runner = CliRunner()

JOB = textwrap.dedent("""\
    apiVersion: batch/v1
    kind: Job
    metadata: {name: train, namespace: team-a}
    spec:
      parallelism: 2
      scheduling:
        schedulingPolicy: {gang: {}}
      template:
        spec:
          containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]
    """)


def run(*args: str, env: dict | None = None):
    return runner.invoke(app, list(args), env=env)


def test_submit_get_describe(server, cluster, tmp_path):
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "4"})
    env = {"GANGPLANK_SERVER": server, "GANGPLANK_CLUSTER": cluster}
    (tmp_path / "job.yaml").write_text(JOB)
    dry = run("submit", "-f", str(tmp_path / "job.yaml"), "--dry-run", env=env)
    assert dry.exit_code == 0, dry.output
    assert "team-a/train Scheduled (2/2 pods) (dry run)" in dry.output
    done = run("submit", "-f", str(tmp_path / "job.yaml"), env=env)
    assert done.exit_code == 0 and "team-a/train Scheduled (2/2 pods)" in done.output
    body = {"name": "big", "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 1}},
                                          "pods": [{"name": "p", "requests": {"cpu": "64"}}]}]}
    (tmp_path / "big.json").write_text(json.dumps(body))
    waits = run("submit", "-f", str(tmp_path / "big.json"), "-n", "team-b", "--server", server, "--cluster", cluster)
    assert waits.exit_code == 0 and "team-b/big Pending (0/1 pods): 0/1 nodes are available: 1 Insufficient cpu." in waits.output

    listed = run("get", "workloads", env=env)
    assert listed.exit_code == 0
    lines = listed.output.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "PRIORITY", "PHASE", "PODS", "POSITION"]
    assert lines[1].split()[:5] == ["team-a", "train", "0", "Scheduled", "2/2"]
    assert lines[2].split()[:5] == ["team-b", "big", "0", "Pending", "0/1"]
    assert len(run("get", "workloads", "--namespace", "team-b", env=env).output.splitlines()) == 2

    described = run("describe", "team-a/train", env=env)
    assert described.exit_code == 0
    out = described.output
    for expected in ("Name:               train", "Namespace:          team-a", "Phase:              Scheduled",
                     "Pod Groups:", "  job:", "    Min Count:   2", "    Placed:      2/2",
                     "PodGroupInitiallyScheduled", "Events:", "PodGroupScheduled   job: train-0 on n1, train-1 on n1"):
        assert expected in out, expected
    assert any(line.split() == ["train-0", "Running", "n1"] for line in out.splitlines())
    pending = run("describe", "team-b/big", env=env).output
    assert "Waiting:     0/1 nodes are available: 1 Insufficient cpu." in pending
    assert any(line.split() == ["p-0", "Pending", "<pending>"] for line in pending.splitlines())

    finished = run("finish", "team-a/train", "job/train-0", "--phase", "Succeeded", env=env)
    assert finished.exit_code == 0, finished.output
    assert "job: Scheduled, 1 running, 0 pending, 1 succeeded, 0 failed (minCount 2)" in finished.output
    out = run("describe", "team-a/train", env=env).output
    assert "    Finished:    1 succeeded, 0 failed" in out
    assert any(line.split() == ["train-0", "Succeeded", "<none>"] for line in out.splitlines())
    again = run("finish", "team-a/train", "job/train-0", "--phase", "Failed", env=env)
    assert again.exit_code == 1 and "409" in again.output
    assert run("finish", "team-a/train", "train-1", "--phase", "Failed", env=env).exit_code == 2
    assert run("finish", "team-a/train", "job/train-1", "--phase", "Running", env=env).exit_code == 2


def test_client_commands_fail_clearly(server, cluster, tmp_path):
    env = {"GANGPLANK_SERVER": server, "GANGPLANK_CLUSTER": cluster}
    missing = run("describe", "team-a/nope", env=env)
    assert missing.exit_code == 1 and "404" in missing.output
    assert run("describe", "nope", env=env).exit_code == 2
    (tmp_path / "bad.yaml").write_text(JOB.replace("containers:", "nodeName: n1\n      containers:"))
    refused = run("submit", "-f", str(tmp_path / "bad.yaml"), env=env)
    assert refused.exit_code == 2 and "spec.template.spec.nodeName" in refused.output
    (tmp_path / "broken.yaml").write_text("a: b: c")
    broken = run("submit", "-f", str(tmp_path / "broken.yaml"), env=env)
    assert broken.exit_code == 2 and "not valid YAML" in broken.output
    (tmp_path / "invalid.json").write_text(json.dumps({"name": "x", "podGroups": []}))
    invalid = run("submit", "-f", str(tmp_path / "invalid.json"), env=env)
    assert invalid.exit_code == 1 and "422" in invalid.output and "body.podGroups" in invalid.output
    down = run("get", "workloads", "--server", "http://127.0.0.1:9", env={"GANGPLANK_CLUSTER": cluster})
    assert down.exit_code == 3 and "cannot reach http://127.0.0.1:9" in down.output


STACK = textwrap.dedent("""\
    apiVersion: v1
    kind: Service
    metadata: {name: front, namespace: team-c}
    spec: {ports: [{port: 80}]}
    ---
    apiVersion: jobset.x-k8s.io/v1alpha2
    kind: JobSet
    metadata: {name: demo, namespace: team-c}
    spec:
      replicatedJobs:
      - name: driver
        template: {spec: {template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}}}}
      - name: workers
        dependsOn: [{name: driver, status: Ready}]
        template:
          spec:
            parallelism: 2
            template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}}
    """)


def test_several_files_stages_delete_nodes_and_outputs(server, cluster, tmp_path):
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "8"}, labels={"zone": "a"})
    env = {"GANGPLANK_SERVER": server, "GANGPLANK_CLUSTER": cluster}
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a-stack.yaml").write_text(STACK)
    (tmp_path / "job.yaml").write_text(JOB)
    done = run("submit", "-f", str(tmp_path / "dir"), "-f", str(tmp_path / "job.yaml"), env=env)
    assert done.exit_code == 0, done.output
    assert "skipped: v1 Service front" in done.output
    assert "team-c/demo Scheduled (1/1 pods)" in done.output and "team-a/train Scheduled (2/2 pods)" in done.output
    assert "staged: team-c/demo-workers waits for team-c/demo (driver Ready)" in done.output
    follow = run("submit", "-f", str(tmp_path / "dir"), "--follow", env=env)
    assert follow.exit_code == 0, follow.output
    assert "team-c/demo-workers Scheduled (2/2 pods)" in follow.output
    nodes = run("get", "nodes", env=env)
    assert nodes.exit_code == 0 and nodes.output.splitlines()[0].split() == ["NAME", "STATUS", "PODS", "CPU", "MEMORY"]
    assert nodes.output.splitlines()[1].split()[:3] == ["n1", "Ready", "5"]
    as_json = json.loads(run("get", "workloads", "-n", "team-c", "-o", "json", env=env).output)
    assert [i["name"] for i in as_json["items"]] == ["demo", "demo-workers"]
    assert "name: n1" in run("get", "nodes", "-o", "yaml", env=env).output
    assert run("get", "workloads", "-A", "-o", "name", env=env).output.split() == [
        "workload/team-c/demo", "workload/team-a/train", "workload/team-c/demo-workers"]
    node = run("describe", "node", "n1", env=env)
    assert node.exit_code == 0 and "Labels:         zone=a" in node.output and "demo-workers" in node.output
    assert run("describe", "workload", "team-a/train", env=env).exit_code == 0
    gone = run("delete", "-f", str(tmp_path / "dir"), env=env)
    assert gone.exit_code == 0 and "workload team-c/demo deleted" in gone.output
    assert "workload team-c/demo-workers deleted" in gone.output
    one = run("delete", "workload", "team-a/train", env=env)
    assert one.exit_code == 0 and "workload team-a/train deleted" in one.output
    assert run("delete", "workload", "team-a/train", env=env).exit_code == 1
    assert run("get", "workloads", "-o", "toml", env=env).exit_code == 2
    assert run("submit", "-f", str(tmp_path / "nothing.yaml"), env=env).exit_code == 2


def test_no_traceback_for_any_input(server, cluster, tmp_path):
    env = {"GANGPLANK_SERVER": server, "GANGPLANK_CLUSTER": cluster}
    for i, text in enumerate(["[1, 2]", "kind: Job", "apiVersion: batch/v1\nkind: Job\nmetadata: 3",
                              "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec: [1]",
                              "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}", "\x00\x01", "{{{"]):
        (tmp_path / f"{i}.yaml").write_text(text)
        result = run("submit", "-f", str(tmp_path / f"{i}.yaml"), env=env)
        assert result.exit_code == 2, (text, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (text, result.exception)


def test_a_file_submitted_again_is_unchanged_and_after_a_delete_a_new_incarnation(server, cluster, tmp_path):
    """Names used again (lifecycle.md): the commands' derived key includes the incarnation a file
    replaces, so a rerun after `delete -f` is recorded, and the same file twice while it lives is one."""
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "4"})
    env = {"GANGPLANK_SERVER": server, "GANGPLANK_CLUSTER": cluster}
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    first = run("submit", "-f", str(job), env=env)
    assert first.exit_code == 0 and first.output.strip() == "team-a/train Scheduled (2/2 pods)", first.output
    same = run("submit", "-f", str(job), env=env)
    assert same.exit_code == 0 and same.output.strip() == "team-a/train unchanged", same.output
    assert run("delete", "-f", str(job), env=env).exit_code == 0
    rerun = run("submit", "-f", str(job), env=env)
    assert rerun.exit_code == 0 and rerun.output.strip() == "team-a/train Scheduled (2/2 pods)", rerun.output
    assert run("submit", "-f", str(job), env=env).output.strip() == "team-a/train unchanged"
    with Client(server, cluster=cluster) as c:
        views = c.list_workloads().items
        assert [(v.name, v.status.phase) for v in views] == [("train", "Finished"), ("train", "Scheduled")]
        assert views[1].previous == views[0].position
        assert c.get_workload("team-a", "train", position=views[0].position).status.phase == "Finished"
        assert [e.position for e in c.history("team-a", "train").events][0] == views[1].position
