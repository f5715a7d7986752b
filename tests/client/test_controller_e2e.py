"""The reference controller (examples/job_controller.py) end to end against a real server: a Job, a JobSet
and a LeaderWorkerSet from a folder; bindings reported, again after node loss and preemption; deletion
when the manifest goes; a restart that submits the same folder again records nothing twice.

JobSets and LeaderWorkerSets become composite trees: where the server does not have composite pod
groups yet (it answers 422 naming `compositePodGroups`), the controller must report that refusal;
once it has them, their pods must be reported bound. Nothing here changes when composite lands.
"""
from __future__ import annotations

import asyncio
import importlib.util
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from gangplank_client import AsyncClient, Client, ProblemError, WorkloadBuilder

ROOT = Path(__file__).resolve().parents[2]


def _load_example():
    spec = importlib.util.spec_from_file_location("job_controller", ROOT / "examples" / "job_controller.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["job_controller"] = module
    spec.loader.exec_module(module)
    return module


job_controller = _load_example()

JOB = textwrap.dedent("""\
    apiVersion: batch/v1
    kind: Job
    metadata: {name: train, namespace: team-a, uid: 0b6f5c1e-train}
    spec:
      parallelism: 2
      template:
        spec:
          containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]
    """)
JOBSET = textwrap.dedent("""\
    apiVersion: jobset.x-k8s.io/v1alpha2
    kind: JobSet
    metadata: {name: trainer, namespace: ml}
    spec:
      replicatedJobs:
      - name: workers
        replicas: 2
        template:
          spec:
            parallelism: 2
            template:
              spec:
                containers: [{name: w, image: x, resources: {requests: {cpu: 100m}}}]
    """)
LWS = textwrap.dedent("""\
    apiVersion: leaderworkerset.x-k8s.io/v1
    kind: LeaderWorkerSet
    metadata: {name: serve, namespace: ml}
    spec:
      replicas: 1
      leaderWorkerTemplate:
        size: 2
        workerTemplate:
          spec:
            containers: [{name: w, image: x, resources: {requests: {cpu: 100m}}}]
    """)


class Running:
    """The controller in a thread of its own (its own event loop), reporting into a list."""

    def __init__(self, server: str, cluster: str, folder: Path) -> None:
        self.reports: list[str] = []
        self.server, self.cluster, self.folder = server, cluster, folder
        self.loop = asyncio.new_event_loop()
        self.stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self.main(),), daemon=True)
        self.thread.start()

    async def main(self) -> None:
        self.stop = asyncio.Event()
        async with AsyncClient(self.server, cluster=self.cluster, reconnect_delay=0.1) as client:
            await job_controller.Controller(client, self.folder, report=self.reports.append).run(0.1, self.stop)

    def close(self) -> None:
        while self.stop is None:
            time.sleep(0.01)
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(10)
        self.loop.close()

    def wait_for(self, predicate, what: str, timeout: float = 20.0, since: int = 0) -> str:
        """The first report from index `since` on that matches."""
        deadline = time.monotonic() + timeout
        seen = since
        while time.monotonic() < deadline:
            for line in self.reports[seen:]:
                seen += 1
                if predicate(line):
                    return line
            time.sleep(0.05)
        pytest.fail(f"no report {what} in {timeout} s; reports: {self.reports}")


def composite_supported(c: Client) -> bool:
    body = WorkloadBuilder("probe").composite("r").basic("g").pods("p").end().build()
    try:
        c.submit("probe", body, dry_run=True)
    except ProblemError as exc:
        if exc.status == 422 and any("compositePodGroups" in e.loc for e in exc.errors):
            return False
        raise
    return True



def test_reference_controller_end_to_end(server, cluster, tmp_path):
    folder = tmp_path / "manifests"
    folder.mkdir()
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "4"})
        c.put_node("n2", allocatable={"cpu": "4"})
        composite = composite_supported(c)
        (folder / "train.yaml").write_text(JOB)
        ctl = Running(server, cluster, folder)
        try:
            first = ctl.wait_for(lambda r: r.startswith("bound team-a/train job/train-0 "), "train-0 bound")
            ctl.wait_for(lambda r: r.startswith("bound team-a/train job/train-1 "), "train-1 bound")
            node = first.split()[-1]
            other = "n2" if node == "n1" else "n1"

            c.delete_node(node)  # node loss: released, then bound again on the other node
            ctl.wait_for(lambda r: r.startswith(f"released team-a/train job/train-0 {node} (PodsLost"), "node loss")
            ctl.wait_for(lambda r: r == f"bound team-a/train job/train-0 {other}", "train-0 bound again")
            c.put_node(node, allocatable={"cpu": "4"})

            urgent = WorkloadBuilder("urgent").priority(1000).gang("g", min_count=2) \
                .pods("p", count=2, requests={"cpu": "4"}).build()
            c.submit("team-b", urgent)  # takes both nodes: train is preempted
            ctl.wait_for(lambda r: r.startswith("released team-a/train job/train-0")
                         and "preempted by team-b/urgent" in r, "preemption")
            mark = len(ctl.reports)
            c.delete_workload("team-b", "urgent")
            ctl.wait_for(lambda r: r.startswith("bound team-a/train job/train-0 "), "train bound after preemption",
                         since=mark)
        finally:
            ctl.close()

        # a restarted controller submits the same manifest again with the same derived key: replayed
        ctl = Running(server, cluster, folder)
        try:
            ctl.wait_for(lambda r: r == "submitted team-a/train Scheduled", "the replayed submission")
            history = c.history("team-a", "train").events
            assert [e.type for e in history].count("WorkloadSubmitted") == 1

            (folder / "trainer.yaml").write_text(JOBSET)
            (folder / "serve.yaml").write_text(LWS)
            for name in ("trainer", "serve"):
                if composite:
                    ctl.wait_for(lambda r, n=name: r.startswith(f"submitted ml/{n} "), f"{name} submitted")
                else:
                    line = ctl.wait_for(lambda r, n=name: r.startswith(f"refused ml/{n}: 422"), f"{name} refused")
                    assert "compositePodGroups" in line
            if composite:
                for name in ("trainer", "serve"):
                    view = c.get_workload("ml", name)
                    for group, pod, _ in view.pods():
                        ctl.wait_for(lambda r, g=group, p=pod, n=name: r.startswith(f"bound ml/{n} {g}/{p} "),
                                     f"{name} {group}/{pod} bound")

            (folder / "train.yaml").unlink()
            ctl.wait_for(lambda r: r == "deleted team-a/train Finished", "deletion")
            assert c.get_workload("team-a", "train").status.phase == "Finished"
        finally:
            ctl.close()
