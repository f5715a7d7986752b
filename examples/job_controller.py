"""A reference job controller built on gangplank-client only.

It stands in for a Kubernetes job controller: a folder of manifests plays the API server's watch.
Each manifest (Job, JobSet, LeaderWorkerSet, or a scheduling.k8s.io bundle; one job per file) is
converted with `gangplank_client.kube.convert` and submitted with an idempotency key derived from
the object (its uid, else its generation, else a hash of its content), so a restarted controller
submitting the same folder again gets the first answers back and records nothing twice. A JobSet
whose replicated jobs wait for others (`dependsOn`, `startupPolicyOrder: InOrder`) is submitted stage
by stage: each later stage once what it waits for is reached (`Ready`: every pod of those replicated
jobs placed; `Complete`: every one of them reported `Succeeded`, by the finished-pod reports). It
follows the event feed and reports every pod's node as it is bound, released (preemption, node loss)
and bound again; when a manifest's file goes away it deletes the workload and its stages.

    python examples/job_controller.py --manifests ./jobs --server http://127.0.0.1:8000 --cluster default

Reports are lines on stdout:
    submitted team-a/train Scheduled
    staged team-a/demo-workers waits for team-a/demo (driver Ready)
    bound team-a/train job/train-0 n1
    released team-a/train job/train-0 n1 (PodsLost: NodeRemoved)
    refused team-a/trainer: 422 Unprocessable Content ... (the manifest is not submitted)
    deleted team-a/train
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gangplank_client import AsyncClient, ProblemError, WorkloadView
from gangplank_client.kube import Conversion, Stage, convert, load

SUFFIXES = (".yaml", ".yml", ".json")


def object_key(obj: dict[str, Any], text: str) -> str:
    """What makes this object this object: uid, else namespace/name/generation, else its content."""
    meta = obj.get("metadata") or {}
    if meta.get("uid"):
        return str(meta["uid"])
    if meta.get("generation"):
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}/{meta['generation']}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class Owned:
    namespace: str
    name: str
    key: str
    fingerprint: str  # the file's content when it was handled
    pending: list[Stage] = field(default_factory=list)  # later stages of a JobSet, not submitted yet
    stages: list[str] = field(default_factory=list)  # the names of those submitted
    conversion: Conversion | None = None  # where each part of the bodies came from in the manifest


def refusal(conversion: Conversion | None, namespace: str, body: dict[str, Any], exc: ProblemError) -> str:
    """A server's refusal on one line, each field named at its manifest path where the body was converted."""
    named = conversion.refusal(namespace, body["name"], exc) if conversion is not None else str(exc)
    if not named.startswith(str(exc.status)):
        named = f"{exc.status} {exc.title}: {named}"
    return named.replace("\n", " |")


@dataclass
class Controller:
    client: AsyncClient
    folder: Path
    report: Callable[[str], None] = print
    owned: dict[Path, Owned] = field(default_factory=dict)
    nodes: dict[tuple[str, str, str, str], str | None] = field(default_factory=dict)
    refused: dict[Path, str] = field(default_factory=dict)
    head: int = 0  # the feed's last position when this run started
    advancing: asyncio.Lock = field(default_factory=asyncio.Lock)  # one stage check at a time

    # -- the folder ---------------------------------------------------------------------------
    async def sync(self) -> None:
        """Submit new manifests, delete the workloads of removed ones."""
        present = {p for p in self.folder.iterdir() if p.suffix in SUFFIXES and p.is_file()}
        for path in sorted(present):
            text = path.read_text(encoding="utf-8")
            if self.owned.get(path, Owned("", "", "", "")).fingerprint == text or self.refused.get(path) == text:
                continue
            await self.submit(path, text)
        for path in sorted(set(self.owned) - present):
            await self.delete(self.owned.pop(path))
        for path in set(self.refused) - present:
            del self.refused[path]

    async def submit(self, path: Path, text: str) -> None:
        try:
            objs = load(text)
            conversion = convert(objs)
            if len(conversion.workloads) != 1:
                raise ValueError(f"{len(conversion.workloads)} workloads in one file (this controller takes one)")
        except ValueError as exc:
            self.refused[path] = text
            self.report(f"refused {path.name}: {exc}")
            return
        (namespace, body), = conversion.workloads
        top = next(o for o in objs if o.get("kind") in ("Job", "JobSet", "LeaderWorkerSet", "Workload"))
        key = "submit/" + object_key(top, text)
        try:
            view = await self.client.submit(namespace, body, idempotency_key=key)
        except ProblemError as exc:
            self.refused[path] = text
            self.report(f"refused {namespace}/{body['name']}: {refusal(conversion, namespace, body, exc)}")
            return
        if view.position <= self.head:  # an answer replayed from before this run: read what holds now
            view = await self.client.get_workload(namespace, body["name"])
        self.owned[path] = Owned(namespace, body["name"], key, text, pending=list(conversion.stages),
                                 conversion=conversion)
        self.report(f"submitted {namespace}/{body['name']} {view.status.phase}")
        self.observe_view(view)
        for stage in conversion.stages:
            self.report(stage.line.replace("staged:", "staged", 1))
        await self.advance()

    # -- stages -------------------------------------------------------------------------------
    async def reached(self, stage: Stage) -> bool:
        for wait in stage.waits_for:
            try:
                view = await self.client.get_workload(wait.namespace, wait.workload)
            except ProblemError as exc:
                if exc.status == 404:
                    return False
                raise
            if not wait.reached(view):
                return False
        return True

    async def advance(self) -> None:
        """Submit every later stage whose wait is over, in order (a stage's key: the object's, and its name)."""
        async with self.advancing:
            for owned in list(self.owned.values()):
                await self._advance(owned)

    async def _advance(self, owned: Owned) -> None:
        while owned.pending and await self.reached(owned.pending[0]):
            stage = owned.pending.pop(0)
            name = stage.body["name"]
            try:
                view = await self.client.submit(stage.namespace, stage.body,
                                                idempotency_key=f"submit/{owned.key}/{name}")
            except ProblemError as exc:
                self.report(f"refused {stage.namespace}/{name}: "
                            f"{refusal(owned.conversion, stage.namespace, stage.body, exc)}")
                continue
            owned.stages.append(name)
            self.report(f"submitted {stage.namespace}/{name} {view.status.phase}")
            self.observe_view(view)

    async def delete(self, owned: Owned) -> None:
        for name in [*reversed(owned.stages), owned.name]:
            try:
                view = await self.client.delete_workload(owned.namespace, name,
                                                         idempotency_key=f"delete/{owned.key}/{name}")
            except ProblemError as exc:
                self.report(f"refused deleting {owned.namespace}/{name}: {exc}".replace("\n", " |"))
                continue
            for key in [k for k in self.nodes if k[:2] == (owned.namespace, name)]:
                del self.nodes[key]
            self.report(f"deleted {owned.namespace}/{name} {view.status.phase}")

    # -- the feed -----------------------------------------------------------------------------
    def ours(self, namespace: str, workload: str) -> bool:
        return any(o.namespace == namespace and workload in (o.name, *o.stages) for o in self.owned.values())

    def bind(self, namespace: str, workload: str, group: str, pod: str, node: str | None, why: str = "") -> None:
        """Report a pod's node when it changes (a submit answer and the feed both tell it: once)."""
        key = (namespace, workload, group, pod)
        before = self.nodes.get(key)
        if before == node:
            return
        self.nodes[key] = node
        if node is not None:
            self.report(f"bound {namespace}/{workload} {group}/{pod} {node}")
        elif before is not None:
            self.report(f"released {namespace}/{workload} {group}/{pod} {before} ({why})")

    def observe_view(self, view: WorkloadView) -> None:
        for group, pod, node in view.pods():
            if node is not None:
                self.bind(view.namespace, view.name, group, pod, node)

    def observe(self, event_type: str, data: dict[str, Any]) -> None:
        ns, wl = data.get("namespace", ""), data.get("workload", "")
        if not self.ours(ns, wl):
            return
        if event_type in ("PodGroupScheduled", "PodsScheduled"):
            for p in data.get("pods") or ():
                self.bind(ns, wl, data["podGroup"], p["pod"], p["node"])
        elif event_type == "CompositePodGroupScheduled":
            for g in data.get("groups") or ():
                for p in g.get("pods") or ():
                    self.bind(ns, wl, g["podGroup"], p["pod"], p["node"])
        elif event_type in ("PodGroupPreempted", "PodsLost"):
            why = f"{event_type}: {data.get('reason')}"
            if event_type == "PodGroupPreempted":
                pre = data.get("preemptor") or {}
                why = f"preempted by {pre.get('namespace')}/{pre.get('workload')}"
            for p in data.get("pods") or ():
                self.bind(ns, wl, data["podGroup"], p["pod"], None, why)

    async def follow(self, after: int) -> None:
        async for event in self.client.watch(after=after, wait=5):
            self.observe(event.type, event.data)
            if event.type in ("PodGroupScheduled", "PodsScheduled", "CompositePodGroupScheduled", "PodsFinished"):
                await self.advance()  # a stage may be due: its wait is pods placed or finished

    async def run(self, interval: float = 0.5, stop: asyncio.Event | None = None) -> None:
        """Follow the feed from now, and the folder every `interval` seconds, until `stop` is set."""
        self.head = (await self.client.events(after=0, limit=1)).last_position
        feed = asyncio.create_task(self.follow(self.head))
        try:
            while stop is None or not stop.is_set():
                await self.sync()
                try:
                    await asyncio.wait_for((stop or asyncio.Event()).wait(), timeout=interval)
                except TimeoutError:
                    pass
        finally:
            feed.cancel()
            await asyncio.gather(feed, return_exceptions=True)


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", required=True, type=Path, help="the folder of manifests")
    parser.add_argument("--server", default=os.environ.get("GANGPLANK_SERVER", "http://127.0.0.1:8000"))
    parser.add_argument("--cluster", default=os.environ.get("GANGPLANK_CLUSTER", "default"))
    parser.add_argument("--token", default=os.environ.get("GANGPLANK_TOKEN"))
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between folder scans")
    args = parser.parse_args(argv)
    async with AsyncClient(args.server, cluster=args.cluster, token=args.token) as client:
        await Controller(client, args.manifests, report=lambda line: print(line, flush=True)).run(args.interval)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
