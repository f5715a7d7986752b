"""The client commands of a job's life (shared/spec/lifecycle.md, *The client, the commands and the
reference controller*): `gangplank scale`, talking to a running server over HTTP, beside the
everyday commands, whose options and error handling (client_common.py) they share."""
from __future__ import annotations

from typing import Any

import typer

from service.cli import client_common as cc

_PODS_OPT = typer.Option(None, "--pods", metavar="GROUP/ENTRY=COUNT",
                         help="A pod entry's new count (repeatable).")
_MIN_OPT = typer.Option(None, "--min-count", metavar="GROUP=N", help="A gang's new minCount (repeatable).")
_FILE_OPT = typer.Option(None, "-f", "--filename", metavar="FILE|-", help="A scale body (JSON or YAML).")


def register(app: typer.Typer) -> None:
    """Add scale to the `gangplank` command."""
    app.command("scale")(scale)


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
