"""The client commands of `gangplank` (shared/spec/client.md, *The `gangplank` command, as a client*):
`submit`, `get workloads` and `describe`, talking to a running server over HTTP.

They use the `gangplank-client` distribution, imported inside each command: the service itself never
imports the client (docs/client.md), so `gangplank serve` runs without it installed.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from gangplank_client import Client, WorkloadView

ServerOpt = typer.Option("http://127.0.0.1:8000", "--server", metavar="URL", envvar="GANGPLANK_SERVER",
                         help="The server's URL.")
ClusterOpt = typer.Option("default", "--cluster", metavar="NAME", envvar="GANGPLANK_CLUSTER", help="The cluster.")
TokenOpt = typer.Option(None, "--token", metavar="TOKEN", envvar="GANGPLANK_TOKEN", help="The bearer token.")
get_app = typer.Typer(help="List resources of a running server.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add submit, get, describe and finish to the `gangplank` command."""
    app.command("submit")(submit)
    app.command("describe")(describe)
    app.command("finish")(finish)
    app.add_typer(get_app, name="get")


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(message, err=True)
    raise typer.Exit(code)


def _client(server: str, cluster: str, token: str | None) -> Client:
    try:
        from gangplank_client import Client
    except ImportError:  # pragma: no cover - the test command installs it
        _fail("error: the client commands need gangplank-client: pip install -e client")
    return Client(server, cluster=cluster, token=token)


def _talking(command: Callable[..., None]) -> Callable[..., None]:
    """Problems, conversion errors and an unreachable server end the command with a message (exit 1
    for a refusal by the server, 2 for everything else), never a traceback."""
    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        import httpx

        from gangplank_client import ProblemError
        try:
            command(*args, **kwargs)
        except ProblemError as exc:
            _fail(f"error: {exc}", 1)
        except httpx.TransportError as exc:
            _fail(f"error: cannot reach {kwargs.get('server')}: {exc}")
        except (OSError, ValueError) as exc:
            _fail(f"error: {exc}")
    return run


def _body_of(path: str, namespace: str | None) -> tuple[str, dict[str, Any]]:
    """A Gangplank body (JSON or YAML, no apiVersion/kind) or any manifests client.md converts."""
    from gangplank_client.kube import load, to_workload

    text = Path(path).read_text(encoding="utf-8") if path != "-" else typer.get_text_stream("stdin").read()
    objs = load(text)
    if len(objs) == 1 and "kind" not in objs[0] and "apiVersion" not in objs[0]:
        body = objs[0]
        return namespace or body.get("namespace") or "default", body
    return to_workload(objs, namespace)


@_talking
def submit(file: str = typer.Option(..., "-f", "--filename", metavar="FILE",
                                     help="A Gangplank body or Kubernetes manifests ('-': stdin)."),
           namespace: str | None = typer.Option(None, "--namespace", "-n", metavar="NS",
                                                       help="The namespace (default: the manifest's)."),
           dry_run: bool = typer.Option(False, "--dry-run", help="Show the outcome, record nothing."),
           server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """Submit a workload (or Job, JobSet, LeaderWorkerSet, scheduling.k8s.io manifests) and print the outcome."""
    ns, body = _body_of(file, namespace)
    with _client(server, cluster, token) as c:
        view = c.submit(ns, body, dry_run=dry_run)
    verb = "would be" if dry_run else "submitted,"
    typer.echo(f"workload {view.namespace}/{view.name} {verb} {view.status.phase}"
               + ("" if dry_run else f" (position {view.position})"))
    for g in view.status.pod_groups:
        typer.echo(f"  {g.name}: {g.phase}, {g.placed_pods}/{len(g.pods)} pods placed (minCount {g.min_count})")
        if g.explanation is not None:
            typer.echo(f"    waiting: {g.explanation.message}")


def _workload_ref(text: str) -> tuple[str, str]:
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name:
        _fail(f"error: {text!r}: give NAMESPACE/NAME")
    return namespace, name


_PODS_ARG = typer.Argument(..., metavar="GROUP/POD...", help="The pods that finished.")


@_talking
def finish(workload: str = typer.Argument(..., metavar="NS/NAME"),
           pods: list[str] = _PODS_ARG,
           phase: str = typer.Option(..., "--phase", metavar="Succeeded|Failed", help="The phase they finished in."),
           server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """Report finished pods (lifecycle.md): they leave their nodes; a gang counts its Succeeded pods."""
    namespace, name = _workload_ref(workload)
    if phase not in ("Succeeded", "Failed"):
        _fail(f"error: --phase {phase!r}: give Succeeded or Failed")
    entries = []
    for pod in pods:
        group, sep, pod_name = pod.partition("/")
        if not sep or not group or not pod_name:
            _fail(f"error: {pod!r}: give GROUP/POD")
        entries.append({"podGroup": group, "name": pod_name, "phase": phase})
    with _client(server, cluster, token) as c:
        view = c.finish_pods(namespace, name, entries)
    typer.echo(f"workload {view.namespace}/{view.name}: {view.status.phase}")
    for g in view.status.pod_groups:
        typer.echo(f"  {g.name}: {g.phase}, {g.placed_pods} running, {g.pending_pods} pending, "
                   f"{g.succeeded_pods} succeeded, {g.failed_pods} failed (minCount {g.min_count})")


def _pages(c: Client, namespace: str | None) -> Iterator[WorkloadView]:
    after = None
    while True:
        page = c.list_workloads(namespace=namespace, after=after, limit=500)
        yield from page.items
        if page.next is None:
            return
        after = page.next


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["   ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


@get_app.command("workloads")
@_talking
def get_workloads(namespace: str | None = typer.Option(None, "--namespace", "-n", metavar="NS",
                                                       help="Only this namespace (default: all)."),
                  server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """List the workloads, in submission order."""
    with _client(server, cluster, token) as c:
        rows = [["NAMESPACE", "NAME", "PRIORITY", "PHASE", "PODS", "POSITION"]]
        for v in _pages(c, namespace):
            pods = [p for g in v.status.pod_groups for p in g.pods]
            rows.append([v.namespace, v.name, str(v.priority), v.status.phase,
                         f"{sum(p.node is not None for p in pods)}/{len(pods)}", str(v.position)])
    if len(rows) == 1:
        typer.echo("No workloads found.")
        return
    for line in _table(rows):
        typer.echo(line)


def _summary(event: dict[str, Any]) -> str:
    """One line about a decision or input, as kubectl's Events column reads."""
    data = event.get("data") or {}
    group = data.get("podGroup") or data.get("compositePodGroup") or ""
    explanation = data.get("explanation") or {}
    pods = data.get("pods") or []
    if event["type"] in ("PodGroupScheduled", "PodsScheduled"):
        text = f"{group}: " + ", ".join(f"{p['pod']} on {p['node']}" for p in pods[:6]) + (" …" if len(pods) > 6 else "")
    elif event["type"] in ("PodGroupPreempted", "PodsLost"):
        text = f"{group}: {len(pods)} pod(s) released" + (" (whole group)" if data.get("wholeGroup") else "")
        if data.get("preemptor"):
            text += f" for {json.dumps(data['preemptor'], sort_keys=True)}"
    else:
        text = group
    if isinstance(explanation, dict) and explanation.get("message"):
        text += f" - {explanation['message']}"
    return text.strip(" :-") or "-"


@_talking
def describe(workload: str = typer.Argument(..., metavar="NS/NAME"), server: str = ServerOpt,
             cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """Show a workload as `kubectl describe` does: phase, groups and pods with their nodes, what waits and
    why, conditions, and the last decisions."""
    namespace, sep, name = workload.partition("/")
    if not sep or not namespace or not name:
        _fail(f"error: {workload!r}: give NAMESPACE/NAME")
    with _client(server, cluster, token) as c:
        v = c.get_workload(namespace, name)
        history = c.history(namespace, name)
    for line in describe_lines(v, [e.model_dump(by_alias=True) for e in history.events]):
        typer.echo(line)


def describe_lines(v: WorkloadView, events: list[dict[str, Any]]) -> list[str]:
    lines = [f"Name:               {v.name}", f"Namespace:          {v.namespace}", f"Cluster:            {v.cluster}",
             f"Priority:           {v.priority}", f"Preemption Policy:  {v.preemption_policy}",
             f"Position:           {v.position}", f"Phase:              {v.status.phase}"]
    if v.status.composite_pod_groups:
        lines.append("Composite Pod Groups:")
        for cpg in v.status.composite_pod_groups:
            domain = f", domain {cpg.domain.key}={cpg.domain.value}" if cpg.domain else ""
            lines.append(f"  {cpg.name}{f' (in {cpg.parent})' if cpg.parent else ''}: {cpg.phase}, "
                         f"{cpg.satisfied_children}/{len(cpg.children)} children satisfied "
                         f"(minGroupCount {cpg.min_group_count}){domain}")
            if cpg.explanation and cpg.explanation.get("message"):
                lines.append(f"    Waiting: {cpg.explanation['message']}")
    lines.append("Pod Groups:")
    for g in v.status.pod_groups:
        lines += [f"  {g.name}:", f"    Phase:       {g.phase}"]
        if g.parent:
            lines.append(f"    Parent:      {g.parent}")
        lines.append(f"    Min Count:   {g.min_count}")
        lines.append(f"    Placed:      {g.placed_pods}/{len(g.pods)}")
        if g.succeeded_pods or g.failed_pods:
            lines.append(f"    Finished:    {g.succeeded_pods} succeeded, {g.failed_pods} failed")
        if g.domain:
            lines.append(f"    Domain:      {g.domain if isinstance(g.domain, str) else g.domain.value}")
        if g.explanation is not None:
            lines.append(f"    Waiting:     {g.explanation.message}")
            if g.explanation.preemption:
                lines.append(f"    Preemption:  {g.explanation.preemption}")
        lines.append("    Pods:")
        rows = [[p.name, p.phase, p.node or ("<pending>" if p.phase == "Pending" else "<none>")] for p in g.pods]
        lines += ["      " + row for row in _table([["NAME", "PHASE", "NODE"], *rows])]
        for claim in g.claims:
            devices = ", ".join(f"{d.pool}/{d.device}" for d in claim.devices) or "<not allocated>"
            lines.append(f"    Claim {claim.name} ({claim.sharing}): {devices}")
        if g.conditions:
            lines.append("    Conditions:")
            lines += ["      " + row for row in _table([["TYPE", "STATUS", "REASON", "MESSAGE"],
                                                         *([c.type, c.status, c.reason or "", c.message or ""]
                                                           for c in g.conditions)])]
    recent = events[-10:]
    if not recent:
        lines.append("Events:             <none>")
    else:
        lines.append("Events:")
        lines += ["  " + row for row in _table([["POSITION", "TYPE", "MESSAGE"],
                                                *([str(e["position"]), e["type"], _summary(e)] for e in recent)])]
    return lines
