"""`gangplank audit verify` and `gangplank audit explain`: the hash chain, the signed checkpoints, and a
workload's history in words (audit.md)."""
from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import typer

from service.cli.common import (
    BROKEN,
    ClusterOpt,
    DbOpt,
    PublicKeyOpt,
    RequireOpt,
    ServerOpt,
    TokenOpt,
    broken,
    check_cluster,
    console,
    db,
    fail,
    file_cluster,
    friendly,
    no_events,
    out,
    server_of,
)


@friendly
def audit_verify(cluster: str = ClusterOpt, public_key: str | None = PublicKeyOpt,
                 require_checkpoints: bool = RequireOpt, database_url: str | None = DbOpt,
                 server: str | None = ServerOpt, token: str | None = TokenOpt) -> None:
    """Check the hash chain (and the signed checkpoints); exit 1 naming the first bad position."""
    check_cluster(cluster)
    if (remote := server_of(server, database_url)) is not None:
        from service.cli import remote_audit

        remote_audit.verify(remote, cluster, token, public_key, require_checkpoints)
        return
    from service.bootstrap import service_for

    url = db(database_url, reads=True)

    async def run() -> Any:
        from service.cli.checkpoint_cli import check_store

        async with service_for(url) as service:
            store = service.store
            verified = await store.verify(cluster)
            reached = verified.events if verified.ok else (verified.first_bad_position or 1) - 1
            return verified, await check_store(store, cluster, reached, public_key, require_checkpoints)

    result, report = asyncio.run(run())
    verified = {"ok": result.ok, "events": result.events, "head": result.head}
    if not result.ok:
        verified["firstBadPosition"] = result.first_bad_position
    say(cluster, verified, report, bool(public_key or require_checkpoints))


def say(cluster: str, verified: dict[str, Any], report: Any, asked: bool) -> None:
    """Print the verification (the body of GET /audit/verify, with the checkpoints) and its verdict in
    words; exit 1 when it failed. A checkpoint signed by another key fails the verification with the
    chain intact (`ok` stays true, `trusted` false); without checkpoints nothing is trusted, and said."""
    ok, bad = bool(verified["ok"]), verified.get("firstBadPosition")
    cp_bad = report.first_bad_position
    another = report.another_key and ok
    if cp_bad is not None and not another and (ok or cp_bad < (bad or 0)):
        ok, bad = False, cp_bad
    body: dict[str, Any] = {"ok": ok, "events": verified["events"], "head": verified["head"]}
    if not ok:
        body["firstBadPosition"] = bad
    if report.count or asked:
        body["checkpoints"] = report.as_json()
    out.print_json(json.dumps(body))
    if verified["ok"] and verified["events"] == 0 and ok:  # a broken chain counts its good events
        no_events(cluster)
    if another:
        _line(f"{report.problem}; the hash chain is intact ({verified['events']} events), the checkpoints are "
              "not trusted")
        raise typer.Exit(BROKEN)
    if not ok:
        detail = f": {report.problem}" if bad == cp_bad else ""
        _line(f"hash chain broken at position {bad}{detail}")
        raise typer.Exit(BROKEN)
    if asked and not report.count:
        _line("no signed checkpoints to check: nothing is trusted (the hash chain is intact)")
    elif report.trusted:
        _line(f"{report.count} signed checkpoints verified with the public key, the last at position "
              f"{report.last_position}; the hash chain is intact")


def _line(text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


@friendly
def audit_explain(workload: str = typer.Argument(..., metavar="NAMESPACE/NAME",
                                                 help="The workload, e.g. team-a/train-7."),
                  cluster: str | None = typer.Option(
                      None, "--cluster", metavar="NAME",
                      help="The cluster whose stream to read (with --from-file: default, the file's cluster)."),
                  from_file: str | None = typer.Option(None, "--from-file", metavar="FILE",
                                                       help="Explain from an export, without any database."),
                  position: int | None = typer.Option(
                      None, "--position", metavar="N", min=1,
                      help="The incarnation of the name submitted at N (default: the latest)."),
                  database_url: str | None = DbOpt, server: str | None = ServerOpt,
                  token: str | None = TokenOpt) -> None:
    """The workload's history in words: submitted, why it waited, where it ran, who preempted it,
    what freed its room, and where it stands now. Checks the hash chain first."""
    from service.app.audit import Names, causation_positions
    from service.bootstrap import service_for

    remote = server_of(server, database_url, from_file)
    if cluster is None:
        if remote is not None:
            cluster = os.environ.get("GANGPLANK_CLUSTER") or "default"
        elif not from_file:
            fail("error: give --cluster NAME (or --from-file FILE, whose cluster is used)")
        else:
            cluster = file_cluster(from_file)
    check_cluster(cluster)
    if "/" not in workload:
        fail("error: give the workload as NAMESPACE/NAME")
    namespace, name = workload.split("/", 1)
    if remote is not None:
        from service.cli import remote_audit

        _explain_lines(namespace, name, cluster, *remote_audit.explain(remote, cluster, token, namespace, name,
                                                                       position))
        return
    if from_file:
        from service.cli import explain_cli
        try:
            found = explain_cli.file_history(from_file, cluster, namespace, name, position)
        except explain_cli.NoEvents:
            no_events(cluster)
        except explain_cli.ChainBroken as exc:
            broken(exc.position)
        _explain_lines(namespace, name, cluster, *found)
        return
    url = db(database_url, reads=True)

    async def run() -> Any:
        async with service_for(url) as service:
            store = service.store
            # an explanation read from an altered record would be no explanation: the chain first
            # (over the stored texts: a hash per event, no decoding)
            checked = await store.verify(cluster)
            if not checked.ok and checked.first_bad_position is not None:
                broken(checked.first_bad_position)
            if checked.events == 0:
                no_events(cluster)
            names = Names(await service.queries.incarnations(cluster))
            history = await service.queries.history(cluster, namespace, name, position)
            if history is None:
                return None, {}, names
            causes = {}
            for at in causation_positions(history["events"]):
                found = await store.read(cluster, after=at - 1, limit=1)
                if found:
                    causes[at] = found[0].envelope()
            return history, causes, names

    _explain_lines(namespace, name, cluster, *asyncio.run(run()))


def _explain_lines(namespace: str, name: str, cluster: str, history: Any, causes: dict[int, Any],
                   names: Any = None) -> None:
    from service.app.audit import explain

    if history is None:
        fail(f"error: workload {namespace}/{name} not found in cluster {cluster}", 1)
    for line in explain(namespace, name, history["events"], causes, names):
        # markup off: "[#12]" (the position) and any bracket in a message are text, not rich styles
        out.print(line, markup=False, highlight=False, soft_wrap=True)


