"""`gangplank get`: tables (or json, yaml, names) of a running server's workloads and nodes."""
from __future__ import annotations

import typer

from service.cli.client_common import ClusterOpt, OutputOpt, ServerOpt, TokenOpt, connect, emit, pages, table, talking

get_app = typer.Typer(help="List resources of a running server.", no_args_is_help=True)


@get_app.command("workloads")
@talking
def get_workloads(namespace: str | None = typer.Option(None, "--namespace", "-n", metavar="NS",
                                                       help="Only this namespace (default: all)."),
                  all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A", help="Every namespace."),
                  output: str | None = OutputOpt,
                  server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """List the workloads, in submission order."""
    with connect(server, cluster, token) as c:
        views = list(pages(c, None if all_namespaces else namespace))
    if emit(views, output, [f"workload/{v.namespace}/{v.name}" for v in views]):
        return
    rows = [["NAMESPACE", "NAME", "PRIORITY", "PHASE", "PODS", "POSITION"]]
    for v in views:
        pods = [p for g in v.status.pod_groups for p in g.pods]
        rows.append([v.namespace, v.name, str(v.priority), v.status.phase,
                     f"{sum(p.node is not None for p in pods)}/{len(pods)}", str(v.position)])
    if len(rows) == 1:
        typer.echo("No workloads found.")
        return
    for line in table(rows):
        typer.echo(line)



@get_app.command("nodes")
@talking
def get_nodes(output: str | None = OutputOpt, server: str = ServerOpt, cluster: str = ClusterOpt,
              token: str | None = TokenOpt) -> None:
    """List the nodes: pods, cpu and memory allocated of allocatable, taints."""
    with connect(server, cluster, token) as c:
        nodes = c.list_nodes()
    if emit(nodes, output, [f"node/{n.name}" for n in nodes]):
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
    for line in table(rows):
        typer.echo(line)
