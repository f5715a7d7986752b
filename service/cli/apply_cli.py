"""`gangplank apply -f` (client.md, *Everyday use*): every kind `submit` takes and the cluster's own objects
(Nodes, PriorityClasses, DeviceClasses, ResourceSlices), read as one input and applied object by object as
`kubectl apply` does: a refusal prints one line naming the file, the object and the reason, and the other
objects go on; the exit code is that of the worst outcome (0 done, 1 the server refused, 2 input that
cannot be read or converted, 3 the server cannot be reached)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from service.cli.client_common import ClusterOpt, ServerOpt, TokenOpt, connect, talking
from service.cli.inputs import Item, Plan, read

if TYPE_CHECKING:
    from gangplank_client import Client

FilesOpt = typer.Option(..., "-f", "--filename", metavar="FILE|DIR|-",
                        help="Manifests (Kubernetes or Gangplank bodies), a folder of them, or '-' (stdin); "
                             "repeatable: every file is read before anything is applied.")
NamespaceOpt = typer.Option(None, "--namespace", "-n", metavar="NS", help="The namespace (default: the manifest's).")
DryRunOpt = typer.Option(False, "--dry-run", help="Show the outcome, record nothing.")
UnenforcedOpt = typer.Option(False, "--ignore-unenforced",
                             help="Submit pod (anti-)affinity and spread constraints as warnings.")

_PLURAL = {"Node": "node", "PriorityClass": "priorityclass", "DeviceClass": "deviceclass",
           "ResourceSlice": "resourceslice"}


def plan_of(files: list[str], namespace: str | None, ignore_unenforced: bool, *, inventory: bool) -> Plan:
    """The plan of the inputs; skipped objects and warnings go to stderr."""
    plan = read(files, typer.get_text_stream("stdin"), namespace, ignore_unenforced, inventory=inventory)
    for line in plan.notes:
        typer.echo(line, err=True)
    return plan


def refused(item: Item, reason: str) -> None:
    where = f"{item.origin}: " if item.origin else ""
    typer.echo(f"error: {where}{reason}", err=True)


def run(c: Client, plan: Plan, dry_run: bool) -> int:
    """Apply each item on its own; the worst exit code (a server that cannot be reached ends it, 3)."""
    from gangplank_client import ProblemError
    from service.cli.submit_cli import submit_one

    worst = 0
    for item in plan.items:
        if item.kind == "Refused":
            for line in item.errors:
                refused(item, line if line.startswith(item.label) else f"{item.label}: {line}")
                # (a file that cannot be read has no object label: its line names the file)
            worst = max(worst, 2)
            continue
        try:
            if item.kind == "Workload" and "workloadRef" in item.body:  # a PodGroup object's body (lifecycle.md)
                from service.cli.lifecycle_commands import create_podgroup
                typer.echo(create_podgroup(c, item.namespace, item.body, dry_run=dry_run))
            elif item.kind == "Workload":
                typer.echo(submit_one(c, item.namespace, item.body, dry_run, plan.conversion))
            else:
                typer.echo(put_inventory(c, item, dry_run))
        except ProblemError as exc:
            refused(item, f"{item.label}: " + "; ".join(str(exc).splitlines()))
            worst = max(worst, 1 if 400 <= exc.status < 500 else 3)
    return worst


def _exists(fetch: Any) -> bool:
    from gangplank_client import ProblemError
    try:
        fetch()
    except ProblemError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def put_inventory(c: Client, item: Item, dry_run: bool) -> str:
    """Create or replace a cluster object through its inventory route: `node/n1 created|configured`."""
    name, body = item.name, item.body
    if item.kind == "Node":
        existed = _exists(lambda: c.get_node(name))
        c.put_node(name, allocatable=body.get("allocatable") or {}, labels=body.get("labels"),
                   taints=body.get("taints"), unschedulable=bool(body.get("unschedulable")), dry_run=dry_run)
    elif item.kind == "PriorityClass":
        existed = _exists(lambda: c.get_priority_class(name))
        c.put_priority_class(name, value=body.get("value"), preemption_policy=body.get("preemptionPolicy"),  # type: ignore[arg-type]
                             dry_run=dry_run)
    elif item.kind == "DeviceClass":
        existed = _exists(lambda: c.get_device_class(name))
        c.put_device_class(name, body, dry_run=dry_run)
    else:
        existed = _exists(lambda: c.get_resource_slice(name))
        c.put_resource_slice(name, body, dry_run=dry_run)
    verb = "configured" if existed else "created"
    return f"{_PLURAL[item.kind]}/{name} {verb}" + (" (dry run)" if dry_run else "")


def delete_inventory(c: Client, item: Item) -> str:
    """Remove a cluster object (a node: node loss); priority classes stay (Gangplank has no route that
    removes one: workloads keep the priority they were given)."""
    from gangplank_client import ProblemError

    name = item.name
    if item.kind == "PriorityClass":
        return f"priorityclass/{name} kept (priority classes are not removed)"
    remove = {"Node": c.delete_node, "DeviceClass": c.delete_device_class,
              "ResourceSlice": c.delete_resource_slice}[item.kind]
    try:
        remove(name)
    except ProblemError as exc:
        if exc.status != 404:
            raise
        return f"{_PLURAL[item.kind]}/{name} not found"
    return f"{_PLURAL[item.kind]}/{name} deleted"


@talking
def apply(files: list[str] = FilesOpt, namespace: str | None = NamespaceOpt, dry_run: bool = DryRunOpt,
          ignore_unenforced: bool = UnenforcedOpt,
          server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """Create or replace what the manifests give: Nodes, PriorityClasses, DeviceClasses, ResourceSlices
    (e.g. `kubectl get nodes -o yaml | gangplank apply -f -`) and workloads (as submit), object by object."""
    plan = plan_of(files, namespace, ignore_unenforced, inventory=True)
    with connect(server, cluster, token) as c:
        worst = run(c, plan, dry_run)
        for stage in plan.stages:
            typer.echo(stage.line)
    if worst:
        raise typer.Exit(worst)
