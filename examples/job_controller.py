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

It drives jobs to their end (lifecycle.md): `--pod-status FILE` stands in for the kubelet (JSON lines
`{"namespace", "workload", "podGroup", "pod", "phase"}`, read from the start and followed), each line
reported with `podstatus`. A Job with `spec.completions` keeps min(parallelism, completions -
succeeded) pods Pending or Running, growing its entry with `scale` and replacing failed pods up to
`spec.backoffLimit`; an Indexed Job's pods each run the lowest completion index not yet done nor
running. A manifest that changes only in its sizes (a LeaderWorkerSet's `spec.replicas`, a JobSet's
`replicatedJobs[].replicas`, an Indexed Job's `parallelism` and `completions`) is scaled; any other
change is refused. scheduling.k8s.io manifests with PodGroup objects go through `to_objects`: the
workload, then each PodGroup created, and created or deleted as the file gains or loses them.

    python examples/job_controller.py --manifests ./jobs --pod-status ./pods.jsonl --server http://127.0.0.1:8000

Reports are lines on stdout:
    submitted team-a/train Scheduled
    staged team-a/demo-workers waits for team-a/demo (driver Ready)
    bound team-a/train job/train-0 n1
    released team-a/train job/train-0 n1 (PodsLost: NodeRemoved)
    refused team-a/trainer: 422 Unprocessable Content ... (the manifest is not submitted)
    deleted team-a/train
    finished team-a/pi job/pi-0 Succeeded
    index team-a/pi pi-2 1
    completed team-a/pi                    (or: failed team-a/pi, past its backoffLimit)
    scaled team-a/serve
    refused team-a/serve: only spec.replicas may change
    created podgroup team-a/train-0        deleted podgroup team-a/train-0
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gangplank_client import AsyncClient, ProblemError, WorkloadView
from gangplank_client.kube import Conversion, Stage, convert, load, to_objects

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
class JobRun:
    """A Job with `spec.completions`, driven to its end by the pod-status reports (lifecycle.md)."""
    group: str
    entry: str
    parallelism: int
    completions: int
    indexed: bool
    backoff_limit: int
    indices: dict[str, int] = field(default_factory=dict)  # pod -> the completion index it runs
    done: bool = False


def job_run(top: dict[str, Any], body: dict[str, Any]) -> JobRun | None:
    spec = top.get("spec") or {}
    if top.get("kind") != "Job" or spec.get("completions") is None or "podGroups" not in body:
        return None  # a Job without completions is never grown
    group = body["podGroups"][0]
    return JobRun(group["name"], group["pods"][0]["name"], int(spec.get("parallelism", 1)), int(spec["completions"]),
                  spec.get("completionMode") == "Indexed", int(spec.get("backoffLimit", 6)))


# what may change in a submitted manifest: its sizes (lifecycle.md); the words of the refusal
MAY_CHANGE = {"LeaderWorkerSet": "spec.replicas", "JobSet": "spec.replicatedJobs[].replicas",
              "Job": "spec.parallelism and spec.completions of an Indexed Job"}


def changed_paths(old: Any, new: Any, path: str = "") -> set[str]:
    """The dotted paths (list indices as []) where two manifests differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        return set().union(*(changed_paths(old.get(k), new.get(k), f"{path}.{k}" if path else k)
                             for k in set(old) | set(new)))
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return set().union(*(changed_paths(a, b, f"{path}[]") for a, b in zip(old, new)))
    return set() if old == new else {path}


def sizes_only(top: dict[str, Any], paths: set[str]) -> bool:
    kind = top.get("kind")
    allowed = {"LeaderWorkerSet": {"spec.replicas"}, "JobSet": {"spec.replicatedJobs[].replicas"},
               "Job": {"spec.parallelism", "spec.completions"}}.get(str(kind), set())
    if kind == "Job" and (top.get("spec") or {}).get("completionMode") != "Indexed":
        return False
    return bool(paths) and paths <= allowed | {"metadata.generation", "metadata.resourceVersion"}


def scale_entries(old: list[dict[str, Any]], new: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The scale body's entries (lifecycle.md *Growing and shrinking*) that take `new`'s sizes where
    they differ from `old`'s: counts, minCount, minGroupCount, at any depth."""
    out = []
    before = {e["name"]: e for e in old}
    for e in new:
        o = before.get(e["name"], {})
        entry: dict[str, Any] = {"name": e["name"]}
        if e.get("count", 1) != o.get("count", 1) and (kind == "pod" or "count" in e):
            entry["count"] = e.get("count", 1)
        gang = (e.get("schedulingPolicy") or {}).get("gang")
        if kind != "pod" and gang and gang != (o.get("schedulingPolicy") or {}).get("gang"):
            entry["schedulingPolicy"] = {"gang": gang}
        for key, child in (("pods", "pod"), ("podGroups", "group"), ("compositePodGroups", "cpg")):
            if kind != "pod" and key in e and (sub := scale_entries(o.get(key) or [], e[key], child)):
                entry[key] = sub
        if len(entry) > 1:
            out.append(entry)
    return out


@dataclass
class Owned:
    namespace: str
    name: str
    key: str
    fingerprint: str  # the file's content when it was handled
    pending: list[Stage] = field(default_factory=list)  # later stages of a JobSet, not submitted yet
    stages: list[str] = field(default_factory=list)  # the names of those submitted
    conversion: Conversion | None = None  # where each part of the bodies came from in the manifest
    top: dict[str, Any] = field(default_factory=dict)  # the manifest's object, as last handled
    body: dict[str, Any] = field(default_factory=dict)  # its conversion
    job: JobRun | None = None
    podgroups: dict[str, dict[str, Any]] | None = None  # PodGroup objects (to_objects), by name: their manifests


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
    pod_status: Path | None = None  # the kubelet's stand-in: JSON lines of finished pods
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
            if path in self.owned:
                await self.change(path, text)
            else:
                await self.submit(path, text)
        for path in sorted(set(self.owned) - present):
            await self.delete(self.owned.pop(path))
        for path in set(self.refused) - present:
            del self.refused[path]

    async def submit(self, path: Path, text: str) -> None:
        try:
            objs = load(text)
            if any(o.get("kind") == "PodGroup" for o in objs) and any(o.get("kind") == "Workload" for o in objs):
                await self.submit_objects(path, text, objs)
                return
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
        owned = self.owned[path] = Owned(namespace, body["name"], key, text, pending=list(conversion.stages), top=top,
                                         conversion=conversion,
                                         body=body, job=job_run(top, body))
        self.report(f"submitted {namespace}/{body['name']} {view.status.phase}")
        self.observe_view(view)
        if owned.job is not None:
            self.assign_indices(owned, self.job_pods(owned, view))
            await self.drive(owned, view)
        for stage in conversion.stages:
            self.report(stage.line.replace("staged:", "staged", 1))
        await self.advance()

    # -- sizes that change, PodGroup objects --------------------------------------------------
    async def change(self, path: Path, text: str) -> None:
        """A submitted manifest changed: its sizes are scaled, any other change refused."""
        owned = self.owned[path]
        try:
            objs = load(text)
            if owned.podgroups is not None:
                await self.change_objects(owned, text, objs)
                return
            top = next(o for o in objs if o.get("kind") == owned.top.get("kind"))
            paths = changed_paths({**owned.top, "status": None}, {**top, "status": None})
            if paths and not sizes_only(owned.top, paths):
                raise ValueError(f"only {MAY_CHANGE.get(str(top.get('kind')), 'its sizes')} may change")
            (_, body), = convert(objs).workloads
        except (ValueError, StopIteration) as exc:
            self.refused[path] = text
            self.report(f"refused {owned.namespace}/{owned.name}: {exc or 'its kind changed'}")
            return
        entries = {k: scale_entries(owned.body.get(k) or [], body.get(k) or [], "group" if k == "podGroups" else "cpg")
                   for k in ("podGroups", "compositePodGroups")}
        patch = {k: v for k, v in entries.items() if v}
        if patch:
            history = await self.client.history(owned.namespace, owned.name)
            n = sum(1 for e in history.events if e.type == "WorkloadScaled")
            try:
                view = await self.client.scale(owned.namespace, owned.name, patch,
                                               idempotency_key=f"scale/{owned.namespace}/{owned.name}/change-{n + 1}")
            except ProblemError as exc:
                self.refused[path] = text
                self.report(f"refused {owned.namespace}/{owned.name}: {exc}".replace("\n", " |"))
                return
            self.report(f"scaled {owned.namespace}/{owned.name}")
            self.observe_view(view)
        owned.fingerprint, owned.top, owned.body = text, top, body
        if owned.job is not None and (fresh := job_run(top, body)) is not None:
            owned.job.parallelism, owned.job.completions = fresh.parallelism, fresh.completions

    async def submit_objects(self, path: Path, text: str, objs: list[dict[str, Any]]) -> None:
        """A Workload with PodGroup objects (to_objects): the workload, then each PodGroup."""
        namespace, body, podgroups = to_objects(objs)
        wl = next(o for o in objs if o.get("kind") == "Workload")
        key = "submit/" + object_key(wl, text)
        try:
            await self.client.submit(namespace, body, idempotency_key=key)
        except ProblemError as exc:
            self.refused[path] = text
            self.report(f"refused {namespace}/{body['name']}: {exc}".replace("\n", " |"))
            return
        owned = self.owned[path] = Owned(namespace, body["name"], key, text, top=wl, body=body, podgroups={})
        self.report(f"submitted {namespace}/{body['name']}")
        manifests = [o for o in objs if o.get("kind") == "PodGroup"]
        for pg, manifest in zip(podgroups, [m for m in manifests if m["metadata"]["name"] in
                                            {p["name"] for p in podgroups}]):
            await self.create_podgroup(owned, pg, manifest)

    async def change_objects(self, owned: Owned, text: str, objs: list[dict[str, Any]]) -> None:
        """The file of a Workload with PodGroups changed: PodGroups gained are created, lost deleted."""
        assert owned.podgroups is not None
        _, body, podgroups = to_objects(objs)
        if body != owned.body:
            raise ValueError("only its PodGroup objects may change (a Workload's spec is immutable)")
        manifests = {o["metadata"]["name"]: o for o in objs if o.get("kind") == "PodGroup"}
        for pg in podgroups:
            if pg["name"] not in owned.podgroups:
                await self.create_podgroup(owned, pg, manifests[pg["name"]])
        for name in [n for n in owned.podgroups if n not in {p["name"] for p in podgroups}]:
            try:
                await self.client.delete_pod_group(owned.namespace, name,
                                                   idempotency_key=f"delete/podgroup/{owned.namespace}/{name}")
            except ProblemError as exc:
                self.report(f"refused deleting podgroup {owned.namespace}/{name}: {exc}")
                continue
            del owned.podgroups[name]
            self.report(f"deleted podgroup {owned.namespace}/{name}")
        owned.fingerprint = text

    async def create_podgroup(self, owned: Owned, body: dict[str, Any], manifest: dict[str, Any]) -> None:
        meta = manifest.get("metadata") or {}
        key = f"podgroup/{meta['uid']}" if meta.get("uid") else f"podgroup/{owned.namespace}/{body['name']}"
        try:
            pg = await self.client.create_pod_group(owned.namespace, body, idempotency_key=key)
        except ProblemError as exc:
            self.report(f"refused podgroup {owned.namespace}/{body['name']}: {exc}".replace("\n", " |"))
            return
        assert owned.podgroups is not None
        owned.podgroups[body["name"]] = manifest
        self.report(f"created podgroup {owned.namespace}/{body['name']}")
        for p in pg.status.pods:
            if p.node is not None:
                self.bind(owned.namespace, owned.name, pg.name, p.name, p.node)

    # -- jobs driven to their end (lifecycle.md) ---------------------------------------------
    def job_pods(self, owned: Owned, view: WorkloadView) -> list[Any]:
        assert owned.job is not None
        return next((g.pods for g in view.status.pod_groups if g.name == owned.job.group), [])

    def assign_indices(self, owned: Owned, pods: list[Any]) -> None:
        """An Indexed Job's new pods (in `pods`, the group's, without an index yet): each runs the lowest
        completion index with no Succeeded pod and no Pending or Running one."""
        run = owned.job
        if run is None or not run.indexed:
            return
        for pod in pods:
            if pod.name in run.indices:
                continue
            taken = {run.indices[p.name] for p in pods if p.name in run.indices and p.phase != "Failed"}
            run.indices[pod.name] = next((i for i in range(run.completions) if i not in taken), run.completions)
            self.report(f"index {owned.namespace}/{owned.name} {pod.name} {run.indices[pod.name]}")

    async def drive(self, owned: Owned, view: WorkloadView) -> None:
        """Keep min(parallelism, completions - succeeded) pods Pending or Running; end the Job."""
        run = owned.job
        if run is None or run.done:
            return
        pods = self.job_pods(owned, view)
        succeeded = [p.name for p in pods if p.phase == "Succeeded"]
        failed = [p.name for p in pods if p.phase == "Failed"]
        active = [p.name for p in pods if p.phase in ("Pending", "Running")]
        done = len({run.indices.get(p) for p in succeeded}) if run.indexed else len(succeeded)
        if done >= run.completions or len(failed) > run.backoff_limit:
            await self.end_job(owned, "completed" if done >= run.completions else "failed")
            return
        want = min(run.parallelism, run.completions - done)
        if len(active) >= want:
            return
        count = len(pods) + want - len(active)
        view = await self.client.scale_pods(owned.namespace, owned.name, run.group, run.entry, count=count,
                                            idempotency_key=f"scale/{owned.namespace}/{owned.name}/{count}")
        self.assign_indices(owned, self.job_pods(owned, view))
        self.observe_view(view)

    async def end_job(self, owned: Owned, word: str) -> None:
        assert owned.job is not None
        owned.job.done = True
        try:
            await self.client.delete_workload(owned.namespace, owned.name,
                                              idempotency_key=f"delete/{owned.key}/{owned.name}")
        except ProblemError as exc:
            self.report(f"refused deleting {owned.namespace}/{owned.name}: {exc}".replace("\n", " |"))
            return
        self.report(f"{word} {owned.namespace}/{owned.name}")

    async def finished(self, line: dict[str, Any]) -> None:
        """One line of the pod-status file: reported (a line read again changes nothing), then the Job
        it belongs to is driven on."""
        ns, wl, group, pod, phase = (line[k] for k in ("namespace", "workload", "podGroup", "pod", "phase"))
        try:
            await self.client.finish_pods(ns, wl, [{"podGroup": group, "name": pod, "phase": phase}],
                                          idempotency_key=f"finish/{ns}/{wl}/{group}/{pod}")
        except ProblemError as exc:
            self.report(f"refused finish {ns}/{wl} {group}/{pod}: {exc}".replace("\n", " |"))
            return
        self.nodes[(ns, wl, group, pod)] = None  # it left its node: not a release
        self.report(f"finished {ns}/{wl} {group}/{pod} {phase}")
        for owned in [o for o in self.owned.values() if (o.namespace, o.name) == (ns, wl) and o.job is not None]:
            await self.drive(owned, await self.client.get_workload(ns, wl))

    async def follow_pod_status(self, interval: float, stop: asyncio.Event) -> None:
        """Read the pod-status file from its beginning, then follow it as lines are appended."""
        assert self.pod_status is not None
        offset, partial, number = 0, "", 0
        while not stop.is_set():
            if self.pod_status.exists():
                with self.pod_status.open(encoding="utf-8") as f:
                    f.seek(offset)
                    chunk = f.read()
                    offset = f.tell()
                *lines, partial = (partial + chunk).split("\n")
                for text in lines:
                    number += 1
                    if not text.strip():
                        continue
                    try:
                        line = json.loads(text)
                        if not isinstance(line, dict):
                            raise ValueError("not an object")
                        await self.finished(line)
                    except (ValueError, KeyError) as exc:
                        self.report(f"refused {self.pod_status.name} line {number}: {exc}")
            try:
                await asyncio.wait_for(stop.wait(), timeout=interval)
            except TimeoutError:
                pass

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
        stopping = stop or asyncio.Event()
        kubelet = asyncio.create_task(self.follow_pod_status(interval, stopping)) if self.pod_status else None
        try:
            while stop is None or not stop.is_set():
                await self.sync()
                try:
                    await asyncio.wait_for((stop or asyncio.Event()).wait(), timeout=interval)
                except TimeoutError:
                    pass
        finally:
            for task in (feed, kubelet):
                if task is not None:
                    task.cancel()
            await asyncio.gather(*(t for t in (feed, kubelet) if t is not None), return_exceptions=True)


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", required=True, type=Path, help="the folder of manifests")
    parser.add_argument("--server", default=os.environ.get("GANGPLANK_SERVER", "http://127.0.0.1:8000"))
    parser.add_argument("--cluster", default=os.environ.get("GANGPLANK_CLUSTER", "default"))
    parser.add_argument("--token", default=os.environ.get("GANGPLANK_TOKEN"))
    parser.add_argument("--pod-status", type=Path, help="a JSON-lines file of finished pods (the kubelet's stand-in)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between folder scans")
    args = parser.parse_args(argv)
    async with AsyncClient(args.server, cluster=args.cluster, token=args.token) as client:
        await Controller(client, args.manifests, report=lambda line: print(line, flush=True),
                         pod_status=args.pod_status).run(args.interval)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
