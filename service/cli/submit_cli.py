"""`gangplank submit`, `delete` and `finish`: workloads from files (Gangplank bodies or Kubernetes
manifests) sent to a running server, deleted, and their finished pods reported."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from service.cli.client_common import ClusterOpt, ServerOpt, TokenOpt, connect, fail, ns_name, talking

if TYPE_CHECKING:
    from gangplank_client import Client, WorkloadView


FilesOpt = typer.Option(..., "-f", "--filename", metavar="FILE|DIR|-",
                        help="A Gangplank body, Kubernetes manifests, a folder of them, or '-' (stdin); repeatable.")


def _outcome(view: WorkloadView, dry_run: bool) -> str:
    pods = [p for g in view.status.pod_groups for p in g.pods]
    placed = sum(p.node is not None for p in pods)
    line = f"{view.namespace}/{view.name} {view.status.phase} ({placed}/{len(pods)} pods)"
    from service.cli.words import first_reason

    waiting = [first_reason(g.explanation.model_dump(by_alias=True)) for g in view.status.pod_groups
               if g.explanation is not None]
    if waiting:
        line += f": {waiting[0]}"
    return line + (" (dry run)" if dry_run else "")


@talking
def submit(files: list[str] = FilesOpt,
           namespace: str | None = typer.Option(None, "--namespace", "-n", metavar="NS",
                                                help="The namespace (default: the manifest's)."),
           dry_run: bool = typer.Option(False, "--dry-run", help="Show the outcome, record nothing."),
           ignore_unenforced: bool = typer.Option(False, "--ignore-unenforced",
                                                  help="Submit pod (anti-)affinity and spread constraints as warnings."),
           follow: bool = typer.Option(False, "--follow", help="Stay, and submit each later stage when it is due."),
           server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """Submit workloads (Gangplank bodies, or Job, JobSet, LeaderWorkerSet, scheduling.k8s.io manifests):
    every file read as one input, each workload on its own (a refusal names its file and object, the
    others go on; the exit code is the worst outcome's)."""
    from service.cli.apply_cli import plan_of, run

    plan = plan_of(files, namespace, ignore_unenforced, inventory=False)
    with connect(server, cluster, token) as c:
        worst = run(c, plan, dry_run)
        for stage in plan.stages:
            typer.echo(stage.line)
        if follow and not dry_run:
            _follow(c, cluster, plan.stages)
    if worst:
        raise typer.Exit(worst)


def submit_one(c: Client, namespace: str, body: dict[str, Any], dry_run: bool, conversion: Any = None) -> str:
    """Submit one workload with the key derived from it (gangplank_client.keys): the same file
    submitted again while its workload lives is a replay, printed `unchanged`; after its workload
    was deleted, a new incarnation of the name (lifecycle.md, *Names used again*). A 422 names the
    manifest's paths where the body was converted from one (`conversion`)."""
    from gangplank_client import ProblemError
    from gangplank_client.keys import replaced, submission_key

    current = c.current(namespace, str(body.get("name", "")))
    key = submission_key(c.cluster, namespace, body, replaces=replaced(current), dry_run=dry_run)
    try:
        view = c.submit(namespace, body, idempotency_key=key, dry_run=dry_run)
    except ProblemError as exc:
        if exc.status != 422 or conversion is None or (namespace, body.get("name")) not in conversion.sources:
            raise
        raise ProblemError(exc.status, exc.title, conversion.refusal(namespace, body["name"], exc)) from exc
    if not dry_run and current is not None and current.status.deleted_at is None \
            and view.position == current.position:
        return f"{namespace}/{view.name} unchanged"
    return _outcome(view, dry_run)


def _reached(c: Client, wait: Any) -> bool:
    """Every pod of the replicated jobs placed (Ready) or Succeeded (Complete)."""
    from gangplank_client import ProblemError
    try:
        view = c.get_workload(wait.namespace, wait.workload)
    except ProblemError as exc:
        if exc.status == 404:
            return False
        raise
    reached: bool = wait.reached(view)  # the rule of gangplank_client.kube.Wait, as the reference controller's
    return reached


def _follow(c: Client, cluster: str, stages: list[Any]) -> None:
    """Watch the feed and submit each stage once what it waits for is reached."""
    waiting = list(stages)
    after = c.events(after=0, limit=1).last_position
    while waiting:
        for stage in list(waiting):
            if all(_reached(c, w) for w in stage.waits_for):
                typer.echo(submit_one(c, stage.namespace, stage.body, False))
                waiting.remove(stage)
        if waiting:
            after = max(after, c.events(after=after, limit=500, wait=10).last_position)



DeleteTarget = typer.Argument(None, metavar="[workload|podgroup NS/NAME | workload NAME -n NS]")
DeleteFilesOpt = typer.Option(None, "-f", "--filename", metavar="FILE|DIR|-",
                              help="Delete what these manifests give: workloads, and nodes, device classes, slices.")


@talking
def delete(target: list[str] | None = DeleteTarget,
           files: list[str] | None = DeleteFilesOpt,
           namespace: str | None = typer.Option(None, "--namespace", "-n", metavar="NS"),
           server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """Delete what manifests give (-f FILE|DIR|-), or `delete workload NS/NAME` (`workload NAME -n NS`)."""
    from service.cli.apply_cli import delete_inventory, plan_of, refused
    from service.cli.describe_cli import workload_ref

    if target:
        if len(target) != 2 or target[0] not in ("workload", "workloads", "wl", "podgroup", "podgroups") or files:
            fail(f"error: delete {' '.join(target)!r}: give -f FILE|DIR|-, workload NS/NAME, workload NAME -n NS "
                 "or podgroup NS/NAME")
        ns, name = workload_ref(target[1], namespace)
        with connect(server, cluster, token) as c:
            if target[0].startswith("podgroup"):  # lifecycle.md
                from service.cli.lifecycle_commands import delete_podgroup
                delete_podgroup(c, ns, name)
            else:
                _delete_one(c, ns, name)
        return
    if not files:
        fail("error: give -f FILE|DIR|- or `delete workload NS/NAME`")
    plan = plan_of(files, namespace, True, inventory=True)
    worst = 0
    with connect(server, cluster, token) as c:
        for item in plan.items:
            if item.kind == "Refused":
                for line in item.errors:
                    refused(item, line)
                worst = 2
            elif item.kind == "Workload":
                _delete_one(c, item.namespace, item.name, missing_ok=True)
            else:
                typer.echo(delete_inventory(c, item))
        for stage in plan.stages:
            _delete_one(c, stage.namespace, stage.body["name"], missing_ok=True)
    if worst:
        raise typer.Exit(worst)


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



_PODS_ARG = typer.Argument(..., metavar="GROUP/POD...", help="The pods that finished.")


@talking
def finish(workload: str = typer.Argument(..., metavar="NS/NAME"),
           pods: list[str] = _PODS_ARG,
           phase: str = typer.Option(..., "--phase", metavar="Succeeded|Failed", help="The phase they finished in."),
           server: str = ServerOpt, cluster: str = ClusterOpt, token: str | None = TokenOpt) -> None:
    """Report finished pods (lifecycle.md): they leave their nodes; a gang counts its Succeeded pods."""
    namespace, name = ns_name(workload)
    if phase not in ("Succeeded", "Failed"):
        fail(f"error: --phase {phase!r}: give Succeeded or Failed")
    entries = []
    for pod in pods:
        group, sep, pod_name = pod.partition("/")
        if not sep or not group or not pod_name:
            fail(f"error: {pod!r}: give GROUP/POD")
        entries.append({"podGroup": group, "name": pod_name, "phase": phase})
    with connect(server, cluster, token) as c:
        view = c.finish_pods(namespace, name, entries)
    typer.echo(f"workload {view.namespace}/{view.name}: {view.status.phase}")
    for g in view.status.pod_groups:
        typer.echo(f"  {g.name}: {g.phase}, {g.placed_pods} running, {g.pending_pods} pending, "
                   f"{g.succeeded_pods} succeeded, {g.failed_pods} failed (minCount {g.min_count})")
