"""The client commands of `gangplank` (shared/spec/client.md, *The `gangplank` command, as a client*):
`submit`, `get workloads` and `describe`, talking to a running server over HTTP.

They use the `gangplank-client` distribution, imported inside each command: the service itself never
imports the client (docs/client.md), so `gangplank serve` runs without it installed.
"""
from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from gangplank_client import Client, WorkloadView

ServerOpt = typer.Option("http://127.0.0.1:8000", "--server", metavar="URL", envvar="GANGPLANK_SERVER",
                         help="The server's URL.")
ClusterOpt = typer.Option("default", "--cluster", metavar="NAME", envvar="GANGPLANK_CLUSTER", help="The cluster.")
TokenOpt = typer.Option(None, "--token", metavar="TOKEN", envvar="GANGPLANK_TOKEN", help="The bearer token.")
get_app = typer.Typer(help="List resources of a running server.", no_args_is_help=True)


OutputOpt = typer.Option(None, "--output", "-o", metavar="FORMAT", help="wide, json, yaml or name.")


def register(app: typer.Typer) -> None:
    """Add submit, delete, get and describe to the `gangplank` command."""
    app.command("submit")(submit)
    app.command("finish")(finish)
    app.command("delete")(delete)
    app.command("describe")(describe)
    app.add_typer(get_app, name="get")


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(message, err=True)
    raise typer.Exit(code)


def _client(server: str, cluster: str, token: str | None) -> Client:
    try:
        from gangplank_client import Client
    except ImportError:  # pragma: no cover - scripts/serve and the test command install it
        _fail("error: the client commands need gangplank-client: pip install -e client")
    return Client(server, cluster=cluster, token=token)


def _talking(command: Callable[..., None]) -> Callable[..., None]:
    """Problems, conversion errors and an unreachable server end the command with a message (exit 1
    for a refusal by the server, 2 for input that cannot be read or converted, 3 for a server that
    cannot be reached), never a traceback."""
    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        import httpx

        from gangplank_client import ProblemError
        try:
            command(*args, **kwargs)
        except ProblemError as exc:
            _fail(f"error: {exc}", 1 if 400 <= exc.status < 500 else 3)
        except httpx.TransportError as exc:
            _fail(f"error: cannot reach {kwargs.get('server')}: {exc}", 3)
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except (OSError, ValueError) as exc:
            _fail(f"error: {exc}")
    return run


def _inputs(files: list[str], namespace: str | None, ignore_unenforced: bool) -> Any:
    """The Conversion of every -f (files, folders, stdin); a Gangplank body (no apiVersion/kind) is
    taken as it is. Skipped objects and warnings go to stderr."""
    from gangplank_client.kube import Conversion, convert, load, read_sources

    total = Conversion()
    for origin, text in read_sources(files, typer.get_text_stream("stdin")):
        objs = load(text)
        if len(objs) == 1 and "kind" not in objs[0] and "apiVersion" not in objs[0]:
            body = objs[0]
            total.workloads.append((namespace or body.pop("namespace", None) or "default", body))
            continue
        try:
            part = convert(objs, namespace, ignore_unenforced=ignore_unenforced)
        except ValueError as exc:
            raise ValueError(f"{origin}:\n" + "\n".join(f"  {line}" for line in str(exc).splitlines())) from exc
        total.workloads += part.workloads
        total.stages += part.stages
        total.warnings += part.warnings
        total.skipped += part.skipped
    for line in total.skipped + total.warnings:
        typer.echo(line, err=True)
    return total


FilesOpt = typer.Option(..., "-f", "--filename", metavar="FILE|DIR|-",
                        help="A Gangplank body, Kubernetes manifests, a folder of them, or '-' (stdin); repeatable.")


def _outcome(view: WorkloadView, dry_run: bool) -> str:
    pods = [p for g in view.status.pod_groups for p in g.pods]
    placed = sum(p.node is not None for p in pods)
    line = f"{view.namespace}/{view.name} {view.status.phase} ({placed}/{len(pods)} pods)"
    waiting = [g.explanation.message for g in view.status.pod_groups if g.explanation is not None]
    if waiting:
        line += f": {waiting[0]}"
    return line + (" (dry run)" if dry_run else "")


@_talking
def submit(files: list[str] = FilesOpt,
           namespace: str | None = typer.Option(None, "--namespace", "-n", metavar="NS",
                                                help="The namespace (default: the manifest's)."),
           dry_run: bool = typer.Option(False, "--dry-run", help="Show the outcome, record nothing."),
           ignore_unenforced: bool = typer.Option(False, "--ignore-unenforced",
                                                  help="Submit pod (anti-)affinity and spread constraints as warnings."),
           follow: bool = typer.Option(False, "--follow", help="Stay, and submit each later stage when it is due."),
           server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """Submit workloads (Gangplank bodies, or Job, JobSet, LeaderWorkerSet, scheduling.k8s.io manifests)."""
    conversion = _inputs(files, namespace, ignore_unenforced)
    with _client(server, cluster, token) as c:
        for ns, body in conversion.workloads:
            typer.echo(_outcome(c.submit(ns, body, dry_run=dry_run, idempotency_key=_key(cluster, ns, body, dry_run)), dry_run))
        for stage in conversion.stages:
            typer.echo(stage.line)
        if follow and not dry_run:
            _follow(c, cluster, conversion.stages)


def _key(cluster: str, namespace: str, body: dict[str, Any], dry_run: bool) -> str:
    """The same file submitted again is an idempotent replay of the first submission, not a 409."""
    text = json.dumps([cluster, namespace, body, dry_run], sort_keys=True, separators=(",", ":"))
    return "submit-" + hashlib.sha256(text.encode()).hexdigest()[:40]


def _reached(c: Client, wait: Any) -> bool:
    """Every pod of the replicated jobs placed (Ready) or Succeeded (Complete)."""
    from gangplank_client import ProblemError
    try:
        view = c.get_workload(wait.namespace, wait.workload)
    except ProblemError as exc:
        if exc.status == 404:
            return False
        raise
    pods = [p for g in view.status.pod_groups if any(g.name == rj or g.name.startswith(f"{rj}-")
                                                       or g.name.startswith(f"{wait.workload}-{rj}")
                                                       for rj in wait.replicated_jobs) for p in g.pods]
    if wait.condition == "Complete":
        return bool(pods) and all(p.phase == "Succeeded" for p in pods)
    return bool(pods) and all(p.node is not None for p in pods)


def _follow(c: Client, cluster: str, stages: list[Any]) -> None:
    """Watch the feed and submit each stage once what it waits for is reached."""
    waiting = list(stages)
    after = c.events(after=0, limit=1).last_position
    while waiting:
        for stage in list(waiting):
            if all(_reached(c, w) for w in stage.waits_for):
                typer.echo(_outcome(c.submit(stage.namespace, stage.body,
                                             idempotency_key=_key(cluster, stage.namespace, stage.body, False)), False))
                waiting.remove(stage)
        if waiting:
            after = max(after, c.events(after=after, limit=500, wait=10).last_position)


DeleteTarget = typer.Argument(None, metavar="[workload NS/NAME]")
DescribeTarget = typer.Argument(..., metavar="[workload|node] NAME")
DeleteFilesOpt = typer.Option(None, "-f", "--filename", metavar="FILE|DIR|-",
                              help="Delete the workloads these manifests give.")


@_talking
def delete(target: list[str] | None = DeleteTarget,
           files: list[str] | None = DeleteFilesOpt,
           namespace: str | None = typer.Option(None, "--namespace", "-n", metavar="NS"),
           server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """Delete the workloads of manifests (-f FILE|DIR|-), or `delete workload NS/NAME`."""
    if target:
        if len(target) != 2 or target[0] not in ("workload", "workloads") or files:
            _fail(f"error: delete {' '.join(target)!r}: give -f FILE|DIR|- or workload NS/NAME")
        ns, name = _ns_name(target[1])
        with _client(server, cluster, token) as c:
            _delete_one(c, ns, name)
        return
    if not files:
        _fail("error: give -f FILE|DIR|- or `delete workload NS/NAME`")
    conversion = _inputs(files, namespace, True)
    with _client(server, cluster, token) as c:
        for ns, body in [*conversion.workloads, *((s.namespace, s.body) for s in conversion.stages)]:
            _delete_one(c, ns, body["name"], missing_ok=True)


def _delete_one(c: Client, namespace: str, name: str, *, missing_ok: bool = False) -> None:
    from gangplank_client import ProblemError
    try:
        c.delete_workload(namespace, name)
    except ProblemError as exc:
        if missing_ok and exc.status == 404:
            typer.echo(f"{namespace}/{name} not found", err=True)
            return
        raise
    typer.echo(f"workload {namespace}/{name} deleted")


def _ns_name(value: str) -> tuple[str, str]:
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name:
        _fail(f"error: {value!r}: give NAMESPACE/NAME")
    return namespace, name


def _emit(items: list[Any], output: str | None, names: list[str]) -> bool:
    """json/yaml/name output of views; False when a table is wanted."""
    if output in (None, "wide"):
        return False
    if output == "name":
        for n in names:
            typer.echo(n)
        return True
    data = [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in items]
    if output == "json":
        typer.echo(json.dumps({"items": data}, indent=2, sort_keys=True))
    elif output == "yaml":
        import yaml
        typer.echo(yaml.safe_dump({"items": data}, sort_keys=True), nl=False)
    else:
        _fail(f"error: --output {output!r}: use wide, json, yaml or name")
    return True


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
                  all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A", help="Every namespace."),
                  output: str | None = OutputOpt,
                  server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """List the workloads, in submission order."""
    with _client(server, cluster, token) as c:
        views = list(_pages(c, None if all_namespaces else namespace))
    if _emit(views, output, [f"workload/{v.namespace}/{v.name}" for v in views]):
        return
    rows = [["NAMESPACE", "NAME", "PRIORITY", "PHASE", "PODS", "POSITION"]]
    for v in views:
        pods = [p for g in v.status.pod_groups for p in g.pods]
        rows.append([v.namespace, v.name, str(v.priority), v.status.phase,
                     f"{sum(p.node is not None for p in pods)}/{len(pods)}", str(v.position)])
    if len(rows) == 1:
        typer.echo("No workloads found.")
        return
    for line in _table(rows):
        typer.echo(line)


def _rendered(event: dict[str, Any]) -> dict[str, Any]:
    """An event's data with its messages rendered from the codes (events are served as stored)."""
    from service.domain.events import DECISION_TYPES
    from service.domain.reasons import render_decision
    from service.domain.upcasting import upcast
    data = event.get("data") or {}
    t = event.get("type", "")
    try:
        data = upcast(t, int(event.get("schemaVersion", 1)), data)
    except (ValueError, TypeError):
        return data  # a newer server's decision: shown as it came
    return render_decision(t, data) if t in DECISION_TYPES else data


@get_app.command("nodes")
@_talking
def get_nodes(output: str | None = OutputOpt, server: str = ServerOpt, cluster: str = ClusterOpt,
              token: str | None = TokenOpt) -> None:
    """List the nodes: pods, cpu and memory allocated of allocatable, taints."""
    with _client(server, cluster, token) as c:
        nodes = c.list_nodes()
    if _emit(nodes, output, [f"node/{n.name}" for n in nodes]):
        return
    rows = [["NAME", "STATUS", "PODS", "CPU", "MEMORY"] + (["TAINTS", "LABELS"] if output == "wide" else [])]
    for n in nodes:
        row = [n.name, "SchedulingDisabled" if n.unschedulable else "Ready", str(len(n.pods)),
               f"{n.allocated.get('cpu', '0')}/{n.allocatable.get('cpu', '0')}",
               f"{n.allocated.get('memory', '0')}/{n.allocatable.get('memory', '0')}"]
        if output == "wide":
            row += [",".join(f"{t.key}={t.value or ''}:{t.effect}" for t in n.taints) or "<none>",
                    ",".join(f"{k}={v}" for k, v in sorted(n.labels.items())) or "<none>"]
        rows.append(row)
    if len(rows) == 1:
        typer.echo("No nodes found.")
        return
    for line in _table(rows):
        typer.echo(line)


def _summary(event: dict[str, Any]) -> str:
    """One line about a decision or input, as kubectl's Events column reads."""
    data = _rendered(event)
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
def describe(target: list[str] = DescribeTarget,
             server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """Show a workload as `kubectl describe` does (`describe NS/NAME`, `describe workload NS/NAME`), or
    a node (`describe node NAME`)."""
    if len(target) == 1:
        _describe_workload(target[0], server, cluster, token)
    elif len(target) == 2 and target[0] in ("workload", "workloads"):
        _describe_workload(target[1], server, cluster, token)
    elif len(target) == 2 and target[0] in ("node", "nodes"):
        _describe_node(target[1], server, cluster, token)
    else:
        _fail(f"error: describe {' '.join(target)!r}: give NS/NAME, workload NS/NAME or node NAME")


def _describe_workload(workload: str, server: str, cluster: str, token: str | None) -> None:
    namespace, name = _ns_name(workload)
    with _client(server, cluster, token) as c:
        v = c.get_workload(namespace, name)
        history = c.history(namespace, name)
    for line in describe_lines(v, [e.model_dump(by_alias=True) for e in history.events]):
        typer.echo(line)


def _describe_node(node: str, server: str, cluster: str, token: str | None) -> None:
    """A node: labels, taints, allocatable, allocated, free, and the pods on it."""
    with _client(server, cluster, token) as c:
        n = c.get_node(node)
    lines = [f"Name:           {n.name}", f"Unschedulable:  {str(n.unschedulable).lower()}",
             "Labels:         " + (", ".join(f"{k}={v}" for k, v in sorted(n.labels.items())) or "<none>"),
             "Taints:         " + (", ".join(f"{t.key}={t.value or ''}:{t.effect}" for t in n.taints) or "<none>")]
    rows = [["RESOURCE", "ALLOCATABLE", "USED", "FREE"],
            *([r, n.allocatable.get(r, "0"), n.allocated.get(r, "0"), n.free.get(r, "")] for r in sorted(n.allocatable))]
    lines += ["Resources:"] + ["  " + row for row in _table(rows)]
    pods = [p.model_dump(mode="json", by_alias=True) for p in n.pods]
    lines.append(f"Pods:           ({len(pods)})")
    if pods:
        keys = [k for k in ("namespace", "workload", "podGroup", "pod") if any(k in p for p in pods)]
        lines += ["  " + row for row in _table([[k.upper() for k in keys], *([str(p.get(k, "")) for k in keys]
                                                                               for p in pods)])]
    extra = (n.model_extra or {}).get("devices")
    if extra:
        lines.append(f"Devices:        {json.dumps(extra, sort_keys=True)}")
    for line in lines:
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
