"""The client commands of a job's life (shared/spec/lifecycle.md, *The client, the commands and the
reference controller*): `gangplank scale`, `get podgroups`, `describe podgroup`, `delete podgroup`
and PodGroup bodies given to `submit -f`, talking to a running server over HTTP, beside the
everyday commands, whose options and error handling (client_common.py) they share."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer

from service.cli import client_common as cc
from service.cli.get_cli import get_app

if TYPE_CHECKING:
    from gangplank_client import Client

_PODS_OPT = typer.Option(None, "--pods", metavar="GROUP/ENTRY=COUNT",
                         help="A pod entry's new count (repeatable).")
_MIN_OPT = typer.Option(None, "--min-count", metavar="GROUP=N", help="A gang's new minCount (repeatable).")
_FILE_OPT = typer.Option(None, "-f", "--filename", metavar="FILE|-", help="A scale body (JSON or YAML).")


def register(app: typer.Typer) -> None:
    """Add scale and `get podgroups` to the `gangplank` command (describe, delete and submit reach the
    PodGroup functions below from their own modules)."""
    app.command("scale")(scale)
    get_app.command("podgroups")(get_podgroups)


def _read(path: str) -> Any:
    import sys

    import yaml
    text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()  # noqa: SIM115
    try:
        return yaml.safe_load(text)  # JSON is YAML
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not JSON or YAML: {exc}") from None


def _pair(text: str, sep: str, what: str) -> tuple[str, str]:
    left, found, right = text.rpartition("=")
    if not found or not left or not right:
        cc.fail(f"error: {text!r}: give {what}")
    if sep == "/" and left.count("/") != 1:
        cc.fail(f"error: {text!r}: give {what}")
    return left, right


def _count(text: str, value: str) -> int:
    if not value.isdigit():
        cc.fail(f"error: {text!r}: the count must be a whole number")
    return int(value)


def scale_body(pods: list[str], min_counts: list[str]) -> dict[str, Any]:
    """The scale body the options give: pod entries' counts and gangs' minCount, per group in the
    order first named."""
    groups: dict[str, dict[str, Any]] = {}
    for text in pods:
        left, value = _pair(text, "/", "GROUP/ENTRY=COUNT")
        group, entry = left.split("/")
        g = groups.setdefault(group, {"name": group})
        g.setdefault("pods", []).append({"name": entry, "count": _count(text, value)})
    for text in min_counts:
        group, value = _pair(text, "", "GROUP=N")
        groups.setdefault(group, {"name": group})["schedulingPolicy"] = {"gang": {"minCount": _count(text, value)}}
    return {"podGroups": list(groups.values())}


@cc.talking
def scale(workload: str = typer.Argument(..., metavar="NS/NAME"),
          file: str | None = _FILE_OPT, pods: list[str] | None = _PODS_OPT, min_count: list[str] | None = _MIN_OPT,
          dry_run: bool = typer.Option(False, "--dry-run", help="Decide, record nothing."),
          server: str = cc.ServerOpt, cluster: str = cc.ClusterOpt, token: str | None = cc.TokenOpt) -> None:
    """Change a live workload's sizes (lifecycle.md *Growing and shrinking*): -f FILE, or --pods and
    --min-count for pod entries and gangs. Shrinking removes the highest indices first."""
    namespace, name = cc.ns_name(workload)
    if file is not None and (pods or min_count):
        cc.fail("error: give -f FILE, or --pods / --min-count, not both")
    if file is not None:
        body = _read(file)
        if not isinstance(body, dict):
            cc.fail(f"error: {file}: a scale body is an object ({{\"podGroups\": [...]}} or compositePodGroups)")
    elif pods or min_count:
        body = scale_body(pods or [], min_count or [])
    else:
        cc.fail("error: give -f FILE, or --pods GROUP/ENTRY=COUNT and/or --min-count GROUP=N")
    with cc.connect(server, cluster, token) as c:
        view = c.scale(namespace, name, body, dry_run=dry_run)  # a fresh key: the same body twice is two changes
    typer.echo(f"workload {view.namespace}/{view.name} scaled{' (dry run)' if dry_run else ''}: {view.status.phase}")
    for g in view.status.pod_groups:
        typer.echo(f"  {g.name}: {g.phase}, {g.placed_pods} running, {g.pending_pods} pending, "
                   f"{g.succeeded_pods} succeeded, {g.failed_pods} failed (minCount {g.min_count})")


# -- PodGroups: embedded, in trees, and PodGroup objects ------------------------------------------
_HEADER = ["NAMESPACE", "WORKLOAD", "NAME", "KIND", "PHASE", "MIN", "RUNNING", "PENDING", "SUCCEEDED", "FAILED"]


def _row(namespace: str, workload: str, name: str, kind: str, status: Any) -> dict[str, Any]:
    return {"namespace": namespace, "workload": workload, "name": name, "kind": kind, "phase": status.phase,
            "minCount": status.min_count, "running": status.placed_pods, "pending": status.pending_pods,
            "succeeded": status.succeeded_pods, "failed": status.failed_pods,
            "domain": status.domain if isinstance(status.domain, str) or status.domain is None else status.domain.value}


def podgroup_rows(c: Client, namespace: str | None, workload: str | None) -> list[dict[str, Any]]:
    """Every pod group: each workload's own (kind Embedded, or Tree with its parent CPG), then the
    PodGroup objects (kind PodGroup), in submission and creation order."""
    rows = []
    for v in cc.pages(c, namespace):
        if (workload is not None and v.name != workload) or v.spec.pod_group_templates is not None:
            continue  # a workload of templates: its pod groups are its PodGroup objects, listed below
        for g in v.status.pod_groups:
            row = _row(v.namespace, v.name, g.name, "Tree" if g.parent else "Embedded", g)
            rows.append({**row, "parent": g.parent})
    after = None
    while True:
        page = c.list_pod_groups(namespace=namespace, workload=workload, after=after, limit=500)
        for pg in page.items:
            rows.append({**_row(pg.namespace, pg.workload, pg.name, "PodGroup", pg.status), "parent": None,
                         "template": pg.template, "position": pg.position})
        if page.next is None:
            return rows
        after = page.next


@cc.talking
def get_podgroups(namespace: str | None = typer.Option(None, "--namespace", "-n", metavar="NS",
                                                       help="Only this namespace (default: all)."),
                  all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A", help="Every namespace."),
                  workload: str | None = typer.Option(None, "--workload", metavar="NAME", help="Only this workload's."),
                  output: str | None = cc.OutputOpt,
                  server: str = cc.ServerOpt, cluster: str = cc.ClusterOpt, token: str | None = cc.TokenOpt) -> None:
    """List the pod groups: embedded in workloads, inside trees, and PodGroup objects, with phase and counts."""
    with cc.connect(server, cluster, token) as c:
        rows = podgroup_rows(c, None if all_namespaces else namespace, workload)
    if output == "name":
        for r in rows:
            where = r["name"] if r["kind"] == "PodGroup" else f"{r['workload']}/{r['name']}"
            typer.echo(f"podgroup/{r['namespace']}/{where}")
        return
    if output in ("json", "yaml"):
        if output == "json":
            typer.echo(json.dumps({"items": rows}, indent=2, sort_keys=True))
        else:
            import yaml
            typer.echo(yaml.safe_dump({"items": rows}, sort_keys=True), nl=False)
        return
    if output not in (None, "wide"):
        cc.fail(f"error: --output {output!r}: use wide, json, yaml or name")
    if not rows:
        typer.echo("No pod groups found.")
        return
    wide = output == "wide"
    header = _HEADER + (["PARENT", "DOMAIN"] if wide else [])
    table = [header] + [[str(r[k]) for k in ("namespace", "workload", "name", "kind", "phase", "minCount", "running",
                                             "pending", "succeeded", "failed")]
                        + ([r["parent"] or "<none>", r["domain"] or "<none>"] if wide else []) for r in rows]
    for line in cc.table(table):
        typer.echo(line)


def describe_podgroup(target: str, server: str, cluster: str, token: str | None) -> None:
    """`describe podgroup NS/NAME`: a PodGroup object, each pod's phase and the group's counts."""
    namespace, name = cc.ns_name(target)
    with cc.connect(server, cluster, token) as c:
        pg = c.get_pod_group(namespace, name)
    lines = [f"Name:               {pg.name}", f"Namespace:          {pg.namespace}", f"Cluster:            {pg.cluster}",
             f"Workload:           {pg.workload}", f"Template:           {pg.template or '<none>'}",
             f"Priority:           {pg.priority}", f"Preemption Policy:  {pg.preemption_policy}",
             f"Position:           {pg.position}"]
    if pg.status.deleted_at is not None:
        lines.append(f"Deleted At:         {pg.status.deleted_at}")
    lines += [f"Counts:             {pg.status.placed_pods} running, {pg.status.pending_pods} pending, "
              f"{pg.status.succeeded_pods} succeeded, {pg.status.failed_pods} failed", "Pod Group:",
              *cc.group_lines(pg.status)]
    for line in lines:
        typer.echo(line)


def delete_podgroup(c: Client, namespace: str, name: str) -> None:
    """`delete podgroup NS/NAME`."""
    c.delete_pod_group(namespace, name)
    typer.echo(f"podgroup {namespace}/{name} deleted")


def create_podgroup(c: Client, namespace: str, body: dict[str, Any], *, dry_run: bool) -> str:
    """A PodGroup body given to `submit -f` (one with `workloadRef`): created; its outcome line. The same
    file submitted twice is one PodGroup (a key derived from the body)."""
    import hashlib
    digest = hashlib.sha256(json.dumps([namespace, body], sort_keys=True).encode()).hexdigest()[:40]
    pg = c.create_pod_group(namespace, body, dry_run=dry_run, idempotency_key=None if dry_run else f"podgroup-{digest}")
    s = pg.status
    line = f"podgroup {pg.namespace}/{pg.name} {s.phase} ({s.placed_pods}/{len(s.pods)} pods)"
    if s.explanation is not None:
        line += f": {s.explanation.message}"
    return line + (" (dry run)" if dry_run else "")
