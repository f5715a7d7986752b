"""The client and commands of a job's life (lifecycle.md) against a real server: `scale`,
`scale_pods` (Client and AsyncClient) and `gangplank scale`."""
from __future__ import annotations

import json

import httpx
import pytest
from typer.testing import CliRunner

from gangplank_client import AsyncClient, Client, ProblemError
from service.cli.main import app

runner = CliRunner()


def gang(name: str, pods: int = 2, min_count: int = 2, cpu: str = "1") -> dict:
    return {"name": name, "podGroups": [{"name": "job", "schedulingPolicy": {"gang": {"minCount": min_count}},
                                         "pods": [{"name": name, "count": pods, "requests": {"cpu": cpu}}]}]}


def test_scale_and_scale_pods(server, cluster):
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
        c.submit("team-a", gang("pi"))
        v = c.scale("team-a", "pi", {"podGroups": [{"name": "job", "pods": [{"name": "pi", "count": 3}]}]})
        assert [p.name for p in v.status.pod_groups[0].pods] == ["pi-0", "pi-1", "pi-2"]
        assert [d.type for d in v.decisions] == ["PodsScheduled"]
        v = c.scale_pods("team-a", "pi", "job", "pi", count=5, min_count=5)
        g = v.status.pod_groups[0]
        assert (g.placed_pods, g.min_count, g.phase) == (5, 5, "Scheduled")
        with pytest.raises(ProblemError) as exc:
            c.scale_pods("team-a", "pi", "job", "pi", count=2)  # minCount 5 > 2 pods
        assert exc.value.status == 422
        assert [list(e.loc) for e in exc.value.errors] == [["body", "podGroups", 0]]
        dry = c.scale_pods("team-a", "pi", "job", "pi", count=1, min_count=1, dry_run=True)
        assert len(dry.status.pod_groups[0].pods) == 1
        assert len(c.get_workload("team-a", "pi").status.pod_groups[0].pods) == 5


def test_scale_pods_sends_the_one_entry_body_with_a_key():
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(404, json={"title": "Not Found", "status": 404, "detail": "nope"})

    with Client("http://x", cluster="c", transport=httpx.MockTransport(record)) as c, \
            pytest.raises(ProblemError):
        c.scale_pods("team-a", "pi", "job", "pi", count=3, min_count=2)
    assert seen[0].url.path == "/v1/clusters/c/namespaces/team-a/workloads/pi/scale"
    assert json.loads(seen[0].content) == {"podGroups": [{"name": "job", "pods": [{"name": "pi", "count": 3}],
                                                          "schedulingPolicy": {"gang": {"minCount": 2}}}]}
    assert seen[0].headers.get("idempotency-key")


async def test_async_scale(server, cluster):
    async with AsyncClient(server, cluster=cluster) as c:
        await c.put_node("n1", allocatable={"cpu": "8"})
        await c.submit("team-a", gang("el"))
        v = await c.scale_pods("team-a", "el", "job", "el", count=4, min_count=4)
        assert v.status.pod_groups[0].placed_pods == 4


def test_gangplank_scale(server, cluster, tmp_path):
    env = {"GANGPLANK_SERVER": server, "GANGPLANK_CLUSTER": cluster}
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
        c.submit("team-a", gang("train"))
    out = runner.invoke(app, ["scale", "team-a/train", "--pods", "job/train=4", "--min-count", "job=3"], env=env)
    assert out.exit_code == 0, out.output
    assert "workload team-a/train scaled: Scheduled" in out.output
    assert "job: Scheduled, 4 running, 0 pending, 0 succeeded, 0 failed (minCount 3)" in out.output
    (tmp_path / "s.yaml").write_text("podGroups:\n- name: job\n  pods: [{name: train, count: 3}]\n")
    out = runner.invoke(app, ["scale", "team-a/train", "-f", str(tmp_path / "s.yaml")], env=env)
    assert out.exit_code == 0 and "3 running" in out.output, out.output
    refused = runner.invoke(app, ["scale", "team-a/train", "--pods", "job/nope=2"], env=env)
    assert refused.exit_code == 1 and "422" in refused.output
    assert runner.invoke(app, ["scale", "team-a/train", "--pods", "job=2"], env=env).exit_code == 2
    assert runner.invoke(app, ["scale", "team-a/train"], env=env).exit_code == 2
    assert runner.invoke(app, ["scale", "team-a/nope", "--pods", "job/x=1"], env=env).exit_code == 1


TEMPLATES = {"name": "train", "podGroupTemplates": [
    {"name": "worker", "schedulingPolicy": {"gang": {"minCount": 2}},
     "pods": [{"name": "worker", "count": 2, "requests": {"cpu": "1"}}]}]}
TREE = {"name": "lws", "compositePodGroups": [{"name": "serve", "count": 2, "podGroups": [
    {"name": "leader", "schedulingPolicy": {"basic": {}}, "pods": [{"name": "l", "requests": {"cpu": "1"}}]}]}]}


def test_podgroup_calls(server, cluster):
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
        c.submit("team-a", TEMPLATES)
        pg = c.create_pod_group("team-a", {"name": "train-0", "workloadRef": {"workloadName": "train",
                                                                              "templateName": "worker"}})
        assert (pg.workload, pg.template, pg.status.phase, pg.status.placed_pods) == ("train", "worker", "Scheduled", 2)
        assert [d.type for d in pg.decisions] == ["PodGroupScheduled"]
        assert c.get_pod_group("team-a", "train-0").spec.scheduling_policy.gang.min_count == 2
        page = c.list_pod_groups(workload="train")
        assert [p.name for p in page.items] == ["train-0"] and page.next is None
        done = c.delete_pod_group("team-a", "train-0")
        assert done.status.phase == "Finished"
        assert c.list_pod_groups(phase="Finished").items[0].name == "train-0"


def test_gangplank_get_describe_delete_podgroups(server, cluster, tmp_path):
    env = {"GANGPLANK_SERVER": server, "GANGPLANK_CLUSTER": cluster}
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
        c.submit("team-a", TEMPLATES)
        c.submit("team-b", gang("pi"))
        c.submit("team-b", TREE)
    (tmp_path / "pg.yaml").write_text("name: train-0\nworkloadRef: {workloadName: train, templateName: worker}\n")
    out = runner.invoke(app, ["submit", "-f", str(tmp_path / "pg.yaml"), "-n", "team-a"], env=env)
    assert out.exit_code == 0 and "podgroup team-a/train-0 Scheduled (2/2 pods)" in out.output, out.output
    again = runner.invoke(app, ["submit", "-f", str(tmp_path / "pg.yaml"), "-n", "team-a"], env=env)
    assert again.exit_code == 0, again.output  # the same file: one PodGroup
    out = runner.invoke(app, ["get", "podgroups", "-A"], env=env)
    assert out.exit_code == 0, out.output
    lines = [line.split() for line in out.output.splitlines()]
    assert lines[0] == ["NAMESPACE", "WORKLOAD", "NAME", "KIND", "PHASE", "MIN", "RUNNING", "PENDING", "SUCCEEDED",
                        "FAILED"]
    assert ["team-b", "pi", "job", "Embedded", "Scheduled", "2", "2", "0", "0", "0"] in lines
    assert ["team-b", "lws", "serve-0-leader", "Tree", "Scheduled", "1", "1", "0", "0", "0"] in lines
    assert ["team-a", "train", "train-0", "PodGroup", "Scheduled", "2", "2", "0", "0", "0"] in lines
    assert len(lines) == 5
    only = runner.invoke(app, ["get", "podgroups", "--namespace", "team-a", "-o", "name"], env=env)
    assert only.output.split() == ["podgroup/team-a/train-0"], only.output
    wl = runner.invoke(app, ["get", "podgroups", "--workload", "lws", "-o", "json"], env=env)
    assert [i["name"] for i in json.loads(wl.output)["items"]] == ["serve-0-leader", "serve-1-leader"]
    wide = runner.invoke(app, ["get", "podgroups", "-A", "-o", "wide"], env=env)
    assert "PARENT" in wide.output.splitlines()[0] and "serve-1" in wide.output
    described = runner.invoke(app, ["describe", "podgroup", "team-a/train-0"], env=env)
    assert described.exit_code == 0, described.output
    for expected in ("Workload:           train", "Template:           worker", "Counts:             2 running",
                     "    Min Count:   2"):
        assert expected in described.output, expected
    assert any(line.split() == ["worker-0", "Running", "n1"] for line in described.output.splitlines())
    deleted = runner.invoke(app, ["delete", "podgroup", "team-a/train-0"], env=env)
    assert deleted.exit_code == 0 and "podgroup team-a/train-0 deleted" in deleted.output
    assert runner.invoke(app, ["delete", "podgroup", "team-a/train-0"], env=env).exit_code == 1
    assert runner.invoke(app, ["describe", "podgroup", "team-a/nope"], env=env).exit_code == 1
