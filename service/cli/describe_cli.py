"""`gangplank describe`: a workload (its groups, pods, explanation, conditions and last decisions) or a
node, as `kubectl describe` shows them."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from service.cli.client_common import (
    ClusterOpt,
    ServerOpt,
    TokenOpt,
    connect,
    fail,
    group_lines,
    ns_name,
    rendered,
    table,
    talking,
)
from service.cli.words import preemptor_words

if TYPE_CHECKING:
    from gangplank_client import WorkloadView

DescribeTarget = typer.Argument(..., metavar="[workload|node] NAME | NS/NAME")
NamespaceOpt = typer.Option(None, "--namespace", "-n", metavar="NS", help="The workload's namespace (NAME alone).")
PositionOpt = typer.Option(None, "--position", metavar="N", min=1,
                           help="The incarnation of the name submitted at N (default: the latest).")


def _summary(event: dict[str, Any]) -> str:
    """One line about a decision or input, as kubectl's Events column reads."""
    data = rendered(event)
    group = data.get("podGroup") or data.get("compositePodGroup") or ""
    explanation = data.get("explanation") or {}
    pods = data.get("pods") or []
    if event["type"] in ("PodGroupScheduled", "PodsScheduled"):
        text = f"{group}: " + ", ".join(f"{p['pod']} on {p['node']}" for p in pods[:6]) + (" …" if len(pods) > 6 else "")
    elif event["type"] in ("PodGroupPreempted", "PodsLost"):
        text = f"{group}: {len(pods)} pod(s) released" + (" (whole group)" if data.get("wholeGroup") else "")
        if data.get("preemptor"):
            text += f", {preemptor_words(data)}"
    else:
        text = group
    if isinstance(explanation, dict) and explanation.get("message"):
        text += f" - {explanation['message']}"
    return text.strip(" :-") or "-"


@talking
def describe(target: list[str] = DescribeTarget, namespace: str | None = NamespaceOpt,
             position: int | None = PositionOpt,
             server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """Show a workload as `kubectl describe` does (`describe NS/NAME`, `describe workload NS/NAME`,
    `describe workload NAME -n NS`), or a node (`describe node NAME`)."""
    kind, name = ("workload", target[0]) if len(target) == 1 else (target[0], target[1])
    if len(target) == 1 and "/" not in name and namespace is None:
        fail(f"error: describe {name!r}: give NS/NAME, workload NAME -n NS or node NAME")
    if len(target) > 2 or kind not in ("workload", "workloads", "wl", "node", "nodes", "no", "podgroup", "podgroups"):
        fail(f"error: describe {' '.join(target)!r}: give NS/NAME, workload NS/NAME, workload NAME -n NS, "
             "podgroup NS/NAME or node NAME")
    if kind in ("podgroup", "podgroups"):  # lifecycle.md (lifecycle_commands.py)
        from service.cli.lifecycle_commands import describe_podgroup
        ns, found = workload_ref(name, namespace)
        describe_podgroup(f"{ns}/{found}", server, cluster, token)
    elif kind in ("node", "nodes", "no"):
        _describe_node(name, server, cluster, token)
    else:
        _describe_workload(workload_ref(name, namespace), position, server, cluster, token)


def workload_ref(name: str, namespace: str | None) -> tuple[str, str]:
    """NS/NAME, or NAME with -n NS (kubectl's spelling; `default` without -n)."""
    if "/" in name:
        ns, found = ns_name(name)
        if namespace is not None and namespace != ns:
            fail(f"error: {name!r} is in namespace {ns}, not {namespace} (-n)")
        return ns, found
    return namespace or "default", name


def _describe_workload(ref: tuple[str, str], position: int | None, server: str, cluster: str,
                       token: str | None) -> None:
    namespace, name = ref
    with connect(server, cluster, token) as c:
        v = c.get_workload(namespace, name, position=position)
        history = c.history(namespace, name, position=v.position)
    for line in describe_lines(v, [e.model_dump(by_alias=True) for e in history.events]):
        typer.echo(line)


def _describe_node(node: str, server: str, cluster: str, token: str | None) -> None:
    """A node: labels, taints, allocatable, allocated, free, and the pods on it."""
    with connect(server, cluster, token) as c:
        n = c.get_node(node)
        slices = [s for s in c.list_resource_slices() if s.node_name == node]
    lines = [f"Name:           {n.name}", f"Unschedulable:  {str(n.unschedulable).lower()}",
             "Labels:         " + (", ".join(f"{k}={v}" for k, v in sorted(n.labels.items())) or "<none>"),
             "Taints:         " + (", ".join(f"{t.key}={t.value or ''}:{t.effect}" for t in n.taints) or "<none>")]
    rows = [["RESOURCE", "ALLOCATABLE", "USED", "FREE"],
            *([r, n.allocatable.get(r, "0"), n.allocated.get(r, "0"), n.free.get(r, "")] for r in sorted(n.allocatable))]
    lines += ["Resources:"] + ["  " + row for row in table(rows)]
    pods = [p.model_dump(mode="json", by_alias=True) for p in n.pods]
    lines.append(f"Pods:           ({len(pods)})")
    if pods:
        keys = [k for k in ("namespace", "workload", "podGroup", "pod") if any(k in p for p in pods)]
        lines += ["  " + row for row in table([[k.upper() for k in keys], *([str(p.get(k, "")) for k in keys]
                                                                               for p in pods)])]
    lines += _device_lines(slices)
    for line in lines:
        typer.echo(line)


def _device_lines(slices: list[Any]) -> list[str]:
    """The DRA devices the node's resource slices publish, and whom each is allocated to."""
    rows = [["DEVICE", "SLICE", "ALLOCATED TO"]]
    for s in slices:
        usage = {u.name: u for u in s.device_usage}
        for d in s.devices:
            u = usage.get(str(d.get("name")))
            whom = ", ".join(f"{a.namespace}/{a.workload}" + (f" {a.pod}" if a.pod else "") + f" (claim {a.claim})"
                             for a in (u.allocations if u else ())) or "<free>"
            rows.append([f"{s.driver}/{s.pool.get('name', '')}/{d.get('name')}", s.name, whom])
    used = sum(1 for r in rows[1:] if r[2] != "<free>")
    if len(rows) == 1:
        return ["Devices:        <none>"]
    return [f"Devices:        ({used}/{len(rows) - 1} allocated)"] + ["  " + row for row in table(rows)]


def describe_lines(v: WorkloadView, events: list[dict[str, Any]]) -> list[str]:
    lines = [f"Name:               {v.name}", f"Namespace:          {v.namespace}", f"Cluster:            {v.cluster}",
             f"Priority:           {v.priority}", f"Preemption Policy:  {v.preemption_policy}",
             f"Position:           {v.position}"]
    if v.previous is not None:  # a name used again (lifecycle.md)
        lines.append(f"Previous:           {v.previous} (the incarnation of the name before this one)")
    lines.append(f"Phase:              {v.status.phase}")
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
        lines += [f"  {g.name}:", *group_lines(g, g.parent)]
    recent = events[-10:]
    if not recent:
        lines.append("Events:             <none>")
    else:
        lines.append("Events:")
        lines += ["  " + row for row in table([["POSITION", "TYPE", "MESSAGE"],
                                                *([str(e["position"]), e["type"], _summary(e)] for e in recent)])]
    return lines
