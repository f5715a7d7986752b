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
    assert "workload team-a/train would be Scheduled" in dry.output
    done = run("submit", "-f", str(tmp_path / "job.yaml"), env=env)
    assert done.exit_code == 0 and "workload team-a/train submitted, Scheduled" in done.output
    assert "job: Scheduled, 2/2 pods placed (minCount 2)" in done.output
    body = {"name": "big", "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 1}},
                                          "pods": [{"name": "p", "requests": {"cpu": "64"}}]}]}
    (tmp_path / "big.json").write_text(json.dumps(body))
    waits = run("submit", "-f", str(tmp_path / "big.json"), "-n", "team-b", "--server", server, "--cluster", cluster)
    assert waits.exit_code == 0 and "waiting: 0/1 nodes are available: 1 Insufficient cpu." in waits.output

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
    assert down.exit_code == 2 and "cannot reach http://127.0.0.1:9" in down.output
