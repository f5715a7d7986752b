"""The reference controller driving jobs to their end (lifecycle.md), end to end against a real server:
a Job with completions 6 and parallelism 2 to exactly 6 Succeeded pods from its `--pod-status` feed,
a failed index replaced, a LeaderWorkerSet scaled 2 -> 3 -> 2, standalone PodGroups from templates."""
from __future__ import annotations

import asyncio
import json
import textwrap
import time
from pathlib import Path

from gangplank_client import AsyncClient, Client
from tests.client import test_controller_e2e as e2e
from tests.client.test_controller_e2e import job_controller

INDEXED = textwrap.dedent("""\
    apiVersion: batch/v1
    kind: Job
    metadata: {name: pi, namespace: team-a, uid: 3f1c-pi}
    spec:
      completions: 6
      parallelism: 2
      completionMode: Indexed
      backoffLimit: 1
      template:
        spec:
          containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
    """)
LWS = textwrap.dedent("""\
    apiVersion: leaderworkerset.x-k8s.io/v1
    kind: LeaderWorkerSet
    metadata: {name: serve, namespace: ml}
    spec:
      replicas: 2
      leaderWorkerTemplate:
        size: 2
        workerTemplate:
          spec:
            containers: [{name: w, image: x, resources: {requests: {cpu: 100m}}}]
    """)
OBJECTS = textwrap.dedent("""\
    apiVersion: scheduling.k8s.io/v1beta1
    kind: Workload
    metadata: {name: train, namespace: team-b}
    spec:
      podGroupTemplates:
      - name: worker
        schedulingPolicy: {gang: {minCount: 2}}
    ---
    apiVersion: scheduling.k8s.io/v1beta1
    kind: PodGroup
    metadata: {name: train-0, namespace: team-b}
    spec:
      workloadRef: {workloadName: train, templateName: worker}
    """)


def _pods(group: str, n: int) -> str:
    return "".join(textwrap.dedent(f"""\
        ---
        apiVersion: v1
        kind: Pod
        metadata: {{name: {group}-w-{i}, namespace: team-b}}
        spec:
          schedulingGroup: {{podGroupName: {group}}}
          containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]
        """) for i in range(n))


def _podgroup(name: str) -> str:
    return textwrap.dedent(f"""\
        ---
        apiVersion: scheduling.k8s.io/v1beta1
        kind: PodGroup
        metadata: {{name: {name}, namespace: team-b}}
        spec:
          workloadRef: {{workloadName: train, templateName: worker}}
        """)


class Running(e2e.Running):
    """The controller of test_controller_e2e, with a pod-status file."""

    def __init__(self, server: str, cluster: str, folder: Path, pod_status: Path) -> None:
        self.pod_status = pod_status
        super().__init__(server, cluster, folder)

    async def main(self) -> None:
        self.stop = asyncio.Event()
        async with AsyncClient(self.server, cluster=self.cluster, reconnect_delay=0.1) as client:
            await job_controller.Controller(client, self.folder, report=self.reports.append,
                                            pod_status=self.pod_status).run(0.1, self.stop)

    def wait_for(self, line: str, timeout: float = 30.0) -> None:  # type: ignore[override]
        super().wait_for(lambda report: report == line, repr(line), timeout)

    def finish(self, namespace: str, workload: str, group: str, pod: str, phase: str) -> None:
        with self.pod_status.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"namespace": namespace, "workload": workload, "podGroup": group, "pod": pod,
                                "phase": phase}) + "\n")
        self.wait_for(f"finished {namespace}/{workload} {group}/{pod} {phase}")


def _running(c: Client, namespace: str, name: str, group: str) -> list[str]:
    view = c.get_workload(namespace, name)
    return [p.name for g in view.status.pod_groups if g.name == group for p in g.pods if p.phase == "Running"]


def test_an_indexed_job_to_exactly_its_completions_replacing_a_failed_index(server, cluster, tmp_path):
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "pi.yaml").write_text(INDEXED)
    run = Running(server, cluster, folder, tmp_path / "pods.jsonl")
    try:
        run.wait_for("submitted team-a/pi Scheduled")
        assert "index team-a/pi pi-0 0" in run.reports and "index team-a/pi pi-1 1" in run.reports
        with Client(server, cluster=cluster) as c:
            run.finish("team-a", "pi", "job", "pi-1", "Failed")  # index 1 is replaced
            run.wait_for("index team-a/pi pi-2 1")
            succeeded: list[str] = []
            deadline = time.monotonic() + 60
            while "completed team-a/pi" not in run.reports:
                assert time.monotonic() < deadline, run.reports
                running = [p for p in _running(c, "team-a", "pi", "job") if p not in succeeded]
                if not running:  # the controller is growing the Job, or ending it
                    time.sleep(0.05)
                    continue
                run.finish("team-a", "pi", "job", running[0], "Succeeded")
                succeeded.append(running[0])
            view = c.get_workload("team-a", "pi")
        phases = [p.phase for p in view.status.pod_groups[0].pods]
        assert phases.count("Succeeded") == 6 and phases.count("Failed") == 1 and len(phases) == 7
        assert view.status.phase == "Finished"
        indices = sorted(int(line.split()[-1]) for line in run.reports if line.startswith("index "))
        assert indices == [0, 1, 1, 2, 3, 4, 5]  # index 1 twice: its first pod failed
    finally:
        run.close()


def test_a_job_past_its_backoff_limit_fails(server, cluster, tmp_path):
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
    folder = tmp_path / "jobs"
    folder.mkdir()
    plain = INDEXED.replace("  completionMode: Indexed\n", "").replace("3f1c-pi", "3f1c-pj").replace("name: pi,", "name: pj,")
    (folder / "pj.yaml").write_text(plain)
    run = Running(server, cluster, folder, tmp_path / "pods.jsonl")
    try:
        run.wait_for("submitted team-a/pj Scheduled")
        run.finish("team-a", "pj", "job", "pj-0", "Failed")
        run.wait_for("bound team-a/pj job/pj-2 n1")
        run.finish("team-a", "pj", "job", "pj-2", "Failed")  # 2 failures > backoffLimit 1
        run.wait_for("failed team-a/pj")
        assert not any(line.startswith("index ") for line in run.reports)
    finally:
        run.close()


def test_a_leader_worker_set_scaled_2_3_2_and_other_changes_refused(server, cluster, tmp_path):
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
        folder = tmp_path / "jobs"
        folder.mkdir()
        (folder / "serve.yaml").write_text(LWS)
        run = Running(server, cluster, folder, tmp_path / "pods.jsonl")
        try:
            run.wait_for("submitted ml/serve Scheduled")
            (folder / "serve.yaml").write_text(LWS.replace("replicas: 2", "replicas: 3"))
            run.wait_for("scaled ml/serve")
            assert [x.name for x in c.get_workload("ml", "serve").status.composite_pod_groups
                    if x.parent is None] == ["serve-0", "serve-1", "serve-2"]
            run.reports.clear()
            (folder / "serve.yaml").write_text(LWS)
            run.wait_for("scaled ml/serve")
            view = c.get_workload("ml", "serve")
            assert [x.name for x in view.status.composite_pod_groups if x.parent is None] == ["serve-0", "serve-1"]
            assert sum(p.node is not None for _, _, p in [(0, 0, p) for g in view.status.pod_groups
                                                          for p in g.pods]) == 4
            (folder / "serve.yaml").write_text(LWS.replace("size: 2", "size: 3"))
            run.wait_for("refused ml/serve: only spec.replicas may change")
        finally:
            run.close()


def test_podgroup_objects_created_and_deleted_with_the_file(server, cluster, tmp_path):
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
        folder = tmp_path / "jobs"
        folder.mkdir()
        (folder / "train.yaml").write_text(OBJECTS + _pods("train-0", 2))
        run = Running(server, cluster, folder, tmp_path / "pods.jsonl")
        try:
            run.wait_for("created podgroup team-b/train-0")
            assert c.get_pod_group("team-b", "train-0").status.phase == "Scheduled"
            run.wait_for("bound team-b/train train-0/train-0-w-0 n1")
            (folder / "train.yaml").write_text(OBJECTS.split("---")[0] + _podgroup("train-1") + _pods("train-1", 2))
            run.wait_for("created podgroup team-b/train-1")
            run.wait_for("deleted podgroup team-b/train-0")
            assert c.get_pod_group("team-b", "train-0").status.phase == "Finished"
            assert [g.name for g in c.get_workload("team-b", "train").status.pod_groups] == ["train-1"]
        finally:
            run.close()
