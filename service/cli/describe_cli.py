"""`gangplank describe`: a workload (its groups, pods, explanation, conditions and last decisions) or a
node, as `kubectl describe` shows them."""
from __future__ import annotations

import json
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

if TYPE_CHECKING:
    from gangplank_client import WorkloadView

DescribeTarget = typer.Argument(..., metavar="[workload|node] NAME")


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
            text += f" for {json.dumps(data['preemptor'], sort_keys=True)}"
    else:
        text = group
    if isinstance(explanation, dict) and explanation.get("message"):
        text += f" - {explanation['message']}"
    return text.strip(" :-") or "-"


@talking
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
    elif len(target) == 2 and target[0] in ("podgroup", "podgroups"):  # lifecycle.md (lifecycle_commands.py)
        from service.cli.lifecycle_commands import describe_podgroup
        describe_podgroup(target[1], server, cluster, token)
    else:
        fail(f"error: describe {' '.join(target)!r}: give NS/NAME, workload NS/NAME, podgroup NS/NAME or node NAME")


def _describe_workload(workload: str, server: str, cluster: str, token: str | None) -> None:
    namespace, name = ns_name(workload)
    with connect(server, cluster, token) as c:
        v = c.get_workload(namespace, name)
        history = c.history(namespace, name)
    for line in describe_lines(v, [e.model_dump(by_alias=True) for e in history.events]):
        typer.echo(line)


def _describe_node(node: str, server: str, cluster: str, token: str | None) -> None:
    """A node: labels, taints, allocatable, allocated, free, and the pods on it."""
    with connect(server, cluster, token) as c:
        n = c.get_node(node)
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
        lines += [f"  {g.name}:", *group_lines(g, g.parent)]
    recent = events[-10:]
    if not recent:
        lines.append("Events:             <none>")
    else:
        lines.append("Events:")
        lines += ["  " + row for row in table([["POSITION", "TYPE", "MESSAGE"],
                                                *([str(e["position"]), e["type"], _summary(e)] for e in recent)])]
    return lines
