"""`gangplank get`: tables (or json, yaml, names) of a running server's objects, with kubectl's names and
flags (client.md, *Everyday use*): `get workload|workloads|wl [NAME]`, `get node|nodes|no [NAME]`,
`get priorityclasses|pc`, `get deviceclasses`, `get resourceslices`, `get clusters`; `-n NS | -A`,
`-o wide|json|yaml|name`, `-l key=value`, `-w` (the table kept updated from the event feed), `-a` (deleted
workloads too)."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import typer

from service.cli.client_common import (
    ClusterOpt,
    OutputOpt,
    ServerOpt,
    TokenOpt,
    connect,
    emit,
    fail,
    pages,
    table,
    talking,
)
from service.cli.words import first_reason

if TYPE_CHECKING:
    from gangplank_client import Client, NodeView, WorkloadView

get_app = typer.Typer(help="List resources of a running server, as kubectl get does.", no_args_is_help=True)

NameArg = typer.Argument(None, metavar="[NAME]", help="Only this object.")
NamespaceOpt = typer.Option(None, "--namespace", "-n", metavar="NS", help="Only this namespace (default: all).")
AllNamespacesOpt = typer.Option(False, "--all-namespaces", "-A", help="Every namespace.")
SelectorOpt = typer.Option(None, "--selector", "-l", metavar="KEY=VALUE",
                           help="Only the objects whose labels have these values (repeatable, or comma-separated).")
WatchOpt = typer.Option(False, "--watch", "-w", help="After the table, print each row again as it changes "
                                                     "(from the event feed), until interrupted.")
WatchTimeoutOpt = typer.Option(None, "--watch-timeout", metavar="SECONDS", hidden=True,
                               help="With -w: stop watching after this many seconds.")
AllOpt = typer.Option(False, "--all", "-a", help="Deleted workloads too (every incarnation of a name).")

Rows = Callable[["Client"], list[list[str]]]


def _selector(values: Sequence[str] | None) -> dict[str, str]:
    wanted: dict[str, str] = {}
    for value in values or ():
        for part in filter(None, value.split(",")):
            key, sep, val = part.partition("=")
            if not sep or not key:
                fail(f"error: -l {part!r}: give KEY=VALUE")
            wanted[key] = val
    return wanted


def _show(c: Client, rows: Rows, empty: str, watch: bool, timeout: float | None) -> None:
    """The table; with `watch`, every row that changes printed again as the feed moves."""
    first = rows(c)
    if len(first) == 1 and not watch:
        typer.echo(empty)
        return
    for line in table(first):
        typer.echo(line)
    if watch:
        _watch(c, rows, first, timeout)


def _watch(c: Client, rows: Rows, shown: list[list[str]], timeout: float | None) -> None:
    deadline = None if timeout is None else time.monotonic() + timeout
    header, last = shown[0], {tuple(r[:2]): r for r in shown[1:]}
    after = c.events(after=0, limit=1).last_position
    while deadline is None or time.monotonic() < deadline:
        wait = 10.0 if deadline is None else max(0.0, min(10.0, deadline - time.monotonic()))
        page = c.events(after=after, limit=500, wait=wait)
        if not page.events:
            continue
        after = page.events[-1].position
        now = rows(c)[1:]
        changed = [r for r in now if last.get(tuple(r[:2])) != r]
        last = {tuple(r[:2]): r for r in now}
        if changed:
            for line in table([header, *changed])[1:]:
                typer.echo(line)


def _no_labels(selector: Sequence[str] | None, kind: str) -> None:
    if selector:
        fail(f"error: -l: {kind} carry no labels in Gangplank (nodes do)")


@talking
def get_workloads(name: str | None = NameArg, namespace: str | None = NamespaceOpt,
                  all_namespaces: bool = AllNamespacesOpt, output: str | None = OutputOpt,
                  selector: list[str] | None = SelectorOpt, watch: bool = WatchOpt,
                  show_all: bool = AllOpt, watch_timeout: float | None = WatchTimeoutOpt,
                  server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """List the live workloads in submission order (deleted ones too with -a), or one by NAME."""
    _no_labels(selector, "workloads")
    ns = None if all_namespaces else namespace

    def views(c: Client) -> list[WorkloadView]:
        found = [v for v in pages(c, ns) if (name is None or v.name == name)
                 and (show_all or v.status.deleted_at is None or name is not None)]
        if name is not None and not show_all:  # a name: its latest incarnation
            found = found[-1:]
        return found

    with connect(server, cluster, token) as c:
        found = views(c)
        if name is not None and not found:
            fail(f"error: workload {name!r} not found" + (f" in namespace {ns}" if ns else ""), 1)
        if emit(found, output, [f"workload/{v.namespace}/{v.name}" for v in found]):
            return
        wide = output == "wide"
        _show(c, lambda cl: _workload_rows(views(cl), wide), "No workloads found.", watch, watch_timeout)


def _workload_rows(views: list[WorkloadView], wide: bool) -> list[list[str]]:
    rows = [["NAMESPACE", "NAME", "PRIORITY", "PHASE", "PODS", "POSITION"] + (["NODES", "WAITING"] if wide else [])]
    for v in views:
        pods = [p for g in v.status.pod_groups for p in g.pods]
        row = [v.namespace, v.name, str(v.priority), v.status.phase,
               f"{sum(p.node is not None for p in pods)}/{len(pods)}", str(v.position)]
        if wide:
            nodes = sorted({p.node for p in pods if p.node})
            why = next((first_reason(g.explanation.model_dump(by_alias=True)) for g in v.status.pod_groups
                        if g.explanation is not None), "")
            row += [",".join(nodes) or "<none>", why or "<none>"]
        rows.append(row)
    return rows


def _is_gpu(resource: str) -> bool:
    return resource.endswith("/gpu") or resource == "gpu"


def _gpus(n: NodeView) -> str:
    alloc = sum(int(v) for r, v in n.allocatable.items() if _is_gpu(r) and str(v).isdigit())
    used = sum(int(v) for r, v in n.allocated.items() if _is_gpu(r) and str(v).isdigit())
    return f"{used}/{alloc}"


def node_devices(slices: list[Any]) -> dict[str, tuple[int, int]]:
    """(allocated, total) DRA devices per node, from the resource slices that name a node."""
    out: dict[str, tuple[int, int]] = {}
    for s in slices:
        if not s.node_name:
            continue
        used = sum(1 for u in s.device_usage if u.allocations)
        prev = out.get(s.node_name, (0, 0))
        out[s.node_name] = (prev[0] + used, prev[1] + len(s.devices))
    return out


@talking
def get_nodes(name: str | None = NameArg, output: str | None = OutputOpt,
              selector: list[str] | None = SelectorOpt, watch: bool = WatchOpt,
              watch_timeout: float | None = WatchTimeoutOpt,
              server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """List the nodes: pods, cpu, memory and GPUs allocated of allocatable, DRA devices, taints (wide:
    every resource)."""
    wanted = _selector(selector)

    def views(c: Client) -> list[NodeView]:
        return [n for n in c.list_nodes() if (name is None or n.name == name)
                and all(n.labels.get(k) == v for k, v in wanted.items())]

    with connect(server, cluster, token) as c:
        found = views(c)
        if name is not None and not found:
            fail(f"error: node {name!r} not found", 1)
        if emit(found, output, [f"node/{n.name}" for n in found]):
            return
        _show(c, lambda cl: _node_rows(views(cl), node_devices(cl.list_resource_slices()), output == "wide"),
              "No nodes found.", watch, watch_timeout)


def _node_rows(nodes: list[NodeView], devices: dict[str, tuple[int, int]], wide: bool) -> list[list[str]]:
    gpus = any(_is_gpu(r) for n in nodes for r in n.allocatable)
    header = ["NAME", "STATUS", "PODS", "CPU", "MEMORY"] + (["GPU"] if gpus else []) + (["DEVICES"] if devices else [])
    rows = [header + (["RESOURCES", "TAINTS", "LABELS"] if wide else [])]
    for n in nodes:
        row = [n.name, "SchedulingDisabled" if n.unschedulable else "Ready", str(len(n.pods)),
               f"{n.allocated.get('cpu', '0')}/{n.allocatable.get('cpu', '0')}",
               f"{n.allocated.get('memory', '0')}/{n.allocatable.get('memory', '0')}"]
        if gpus:
            row.append(_gpus(n))
        if devices:
            used, total = devices.get(n.name, (0, 0))
            row.append(f"{used}/{total}")
        if wide:
            row += [",".join(f"{r}={n.allocated.get(r, '0')}/{v}" for r, v in sorted(n.allocatable.items())) or "<none>",
                    ",".join(f"{t.key}={t.value or ''}:{t.effect}" for t in n.taints) or "<none>",
                    ",".join(f"{k}={v}" for k, v in sorted(n.labels.items())) or "<none>"]
        rows.append(row)
    return rows


def _objects(kind: str, fetch: Callable[[Client], list[Any]], header: list[str],
             row: Callable[[Any], list[str]]) -> Callable[..., None]:
    @talking
    def command(name: str | None = NameArg, output: str | None = OutputOpt,
                selector: list[str] | None = SelectorOpt, watch: bool = WatchOpt,
                watch_timeout: float | None = WatchTimeoutOpt,
                server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
        _no_labels(selector, kind)

        def views(c: Client) -> list[Any]:
            return [o for o in fetch(c) if name is None or o.name == name]

        with connect(server, cluster, token) as c:
            found = views(c)
            if name is not None and not found:
                fail(f"error: {kind[:-1]} {name!r} not found", 1)
            if emit(found, output, [f"{kind[:-1]}/{o.name}" for o in found]):
                return
            _show(c, lambda cl: [header, *(row(o) for o in views(cl))], f"No {kind} found.", watch, watch_timeout)
    command.__doc__ = f"List the {kind}."
    return command


get_priority_classes = _objects("priorityclasses", lambda c: c.list_priority_classes(),
                                ["NAME", "VALUE", "PREEMPTION POLICY"],
                                lambda o: [o.name, str(o.value), o.preemption_policy])
get_device_classes = _objects("deviceclasses", lambda c: c.list_device_classes(), ["NAME", "SELECTORS"],
                              lambda o: [o.name, str(len(o.selectors))])
get_resource_slices = _objects(
    "resourceslices", lambda c: c.list_resource_slices(), ["NAME", "DRIVER", "POOL", "NODE", "DEVICES"],
    lambda o: [o.name, o.driver, str(o.pool.get("name", "")), o.node_name or ("<all>" if o.all_nodes else "<selector>"),
               f"{sum(1 for u in o.device_usage if u.allocations)}/{len(o.devices)}"])


@talking
def get_clusters(output: str | None = OutputOpt, server: str = ServerOpt, token: str | None = TokenOpt) -> None:
    """List the server's clusters with their last positions."""
    with connect(server, "default", token) as c:
        found = c.clusters()
    if emit(found, output, [f"cluster/{x.name}" for x in found]):
        return
    if not found:
        typer.echo("No clusters found.")
        return
    for line in table([["NAME", "LAST POSITION"], *([x.name, str(x.last_position)] for x in found)]):
        typer.echo(line)


def register(app: typer.Typer) -> None:
    """`get` with kubectl's spellings of each kind (the first listed, the others hidden)."""
    for names, command in ((("workloads", "workload", "wl"), get_workloads), (("nodes", "node", "no"), get_nodes),
                           (("priorityclasses", "priorityclass", "pc"), get_priority_classes),
                           (("deviceclasses", "deviceclass"), get_device_classes),
                           (("resourceslices", "resourceslice"), get_resource_slices),
                           (("clusters", "cluster"), get_clusters)):
        for i, spelling in enumerate(names):
            get_app.command(spelling, hidden=i > 0)(command)
    app.add_typer(get_app, name="get")
