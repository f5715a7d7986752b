"""`gangplank replay` (a summary, `--verify`, `--what-if`) and `gangplank export`: a cluster's stream
read from the store or an export, folded, re-decided and checked (audit.md)."""
from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from service.cli.common import (
    BROKEN,
    ClusterOpt,
    DbOpt,
    PublicKeyOpt,
    RequireOpt,
    ServerOpt,
    TokenOpt,
    UntilOpt,
    broken,
    check_cluster,
    check_until,
    console,
    db,
    fail,
    file_cluster,
    friendly,
    no_events,
    out,
    server_of,
)


async def _envelopes(url: str, cluster: str, until: int | None, *,
                     lean: bool = False) -> tuple[list[dict[str, Any]], int]:
    """The cluster's envelopes and its recorded last position; `lean`: only what folding reads
    (position, type, schemaVersion, data), without metadata and hashes (a replay without --verify
    needs no more)."""
    from service.bootstrap import service_for

    async with service_for(url) as service:
        store = service.store
        if (last := await store.last_position(cluster)) == 0:
            no_events(cluster)
        out_: list[dict[str, Any]] = []
        after = 0
        while True:
            if lean:
                rows = await store.read_data(cluster, after=after, limit=10000, until=until)
                if not rows:
                    return out_, last
                out_.extend({"cluster": cluster, "position": p, "type": t, "schemaVersion": v, "data": d}
                            for p, t, v, d in rows)
                after = rows[-1][0]
                continue
            batch = await store.read(cluster, after=after, limit=10000, until=until)
            if not batch:
                return out_, last
            out_.extend(e.envelope() for e in batch)
            after = batch[-1].position


@friendly
def replay(cluster: str | None = typer.Option(
               None, "--cluster", metavar="NAME",
               help="The cluster whose stream to replay (with --from-file: default, the file's cluster)."),
           until: int | None = UntilOpt,
           verify: bool = typer.Option(False, "--verify", help="Re-decide every input, compare every decision "
                                                               "with the recorded one and recompute the hash chain; "
                                                               "prints the verdict (audit.md)."),
           strict: bool = typer.Option(False, "--strict", help="With --verify: exit 1 for an equivalent verdict "
                                                               "(decisions recorded under older rules)."),
           from_file: str | None = typer.Option(None, "--from-file", metavar="FILE",
                                                help="Replay an export (gangplank export), without any database."),
           public_key: str | None = PublicKeyOpt,
           require_checkpoints: bool = RequireOpt,
           what_if: str | None = typer.Option(
               None, "--what-if", metavar="CHANGES.yaml",
               help="Re-decide the stream under these changes (YAML or JSON, audit.md) and report both worlds; "
                    "records nothing."),
           output: str = typer.Option("table", "--output", metavar="table|json",
                                      help="With --what-if: a table, or the report as canonical JSON."),
           database_url: str | None = DbOpt, server: str | None = ServerOpt, token: str | None = TokenOpt) -> None:
    """Rebuild a cluster's state from its events and print a summary (or, with --what-if, what would
    have happened under changes)."""
    if (remote := server_of(server, database_url, from_file)) is not None:
        _remote(remote, cluster or os.environ.get("GANGPLANK_CLUSTER") or "default", token, until, verify, strict,
                public_key, require_checkpoints, what_if, output)
        return
    if cluster is None:
        if not from_file:
            fail("error: give --cluster NAME (or --from-file FILE, whose cluster is used)")
        cluster = file_cluster(from_file)
    check_cluster(cluster)
    check_until(until)
    url = "" if from_file else db(database_url, reads=True)
    if what_if is not None:
        _what_if(cluster, what_if, until, output, from_file, url, verify)
        return
    # One long fold that allocates much and frees little: the cyclic GC would rescan the growing
    # state over and over (as costly as the fold itself on a large cluster). Off for this command.
    gc.disable()
    try:
        _replay(cluster, until, verify, from_file, url, public_key if verify else None,
                require_checkpoints and verify, strict)
    finally:
        gc.enable()


def _remote(server: str, cluster: str, token: str | None, until: int | None, verify: bool, strict: bool,
            public_key: str | None, require: bool, what_if: str | None, output: str) -> None:
    """replay over the server's HTTP API (remote_audit.py)."""
    from service.cli import remote_audit, whatif_cli

    check_cluster(cluster)
    check_until(until)
    if what_if is None:
        remote_audit.replay(server, cluster, token, until, verify, strict, public_key if verify else None,
                            require and verify)
        return
    if verify:
        fail("error: --what-if and --verify are two commands: give one")
    if output not in ("table", "json"):
        fail(f"--output {output!r}: must be table or json")
    try:
        whatif_cli.write(remote_audit.what_if(server, cluster, token, what_if, until, output))
    except whatif_cli.WhatIfFailed as exc:
        fail(exc.line, exc.code)


def _what_if(cluster: str, changes: str, until: int | None, output: str, from_file: str | None, url: str,
             verify: bool) -> None:
    from service.cli import whatif_cli

    if verify:
        fail("error: --what-if and --verify are two commands: give one")
    if output not in ("table", "json"):
        fail(f"--output {output!r}: must be table or json")
    gc.disable()  # one long fold, as replay (below)
    try:
        text = whatif_cli.run(cluster, changes, until, output, from_file, url)
    except whatif_cli.WhatIfFailed as exc:
        fail(exc.line, exc.code)
    except whatif_cli.NoEvents:
        no_events(cluster)
    finally:
        gc.enable()
    whatif_cli.write(text)



def _replay(cluster: str, until: int | None, verify: bool, from_file: str | None, url: str,
            public_key: str | None = None, require_checkpoints: bool = False, strict: bool = False) -> None:
    """The summary, or the verification with its verdict, by the one replay service (app/replay.py)."""
    from service.app.audit import read_jsonl
    from service.app.replay import ReplayService, summary_export
    from service.cli.checkpoint_cli import file_checkpoints

    with Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("replay", total=None)

        def progress(position: int) -> None:
            bar.update(task, completed=position)

        if from_file:
            envelopes = [e for e in read_jsonl(from_file) if e.get("cluster", cluster) == cluster]
            if not envelopes:
                no_events(cluster)
            bar.update(task, total=envelopes[-1]["position"] if until is None else until)
            if verify:
                summary, report = ReplayService.verify_export(
                    envelopes, file_checkpoints(from_file, cluster), cluster, until,
                    public_key=public_key, require_checkpoints=require_checkpoints, progress=progress)
            else:
                summary, report = summary_export(envelopes, cluster, until, progress), None
        else:
            summary, report = asyncio.run(_from_store(url, cluster, until, verify, public_key, require_checkpoints,
                                                      progress, lambda total: bar.update(task, total=total)))
    if report is not None and report.first_bad_position is not None:
        console.print(report.problem, markup=False, highlight=False, soft_wrap=True)
    out.print_json(json.dumps(summary))
    if verify:
        _verdict(summary, strict)
        if report is not None and report.another_key and report.first_bad_position is not None:
            console.print("the checkpoints are not trusted: signed by another key", style="red", markup=False,
                          highlight=False, soft_wrap=True)
            raise typer.Exit(BROKEN)


async def _from_store(url: str, cluster: str, until: int | None, verify: bool, public_key: str | None,
                      require_checkpoints: bool, progress: Any, total: Any) -> tuple[dict[str, Any], Any]:
    from service.bootstrap import service_for

    async with service_for(url) as service:
        last = await service.store.last_position(cluster)
        total(last if until is None else min(last, until))
        if verify:
            verified = await service.replays.verify(cluster, until, public_key=public_key,
                                                    require_checkpoints=require_checkpoints, progress=progress)
            if verified is None:
                no_events(cluster)
            return verified
        summary = await service.replays.summary(cluster, until, progress)
        if summary is None:
            no_events(cluster)
        return summary, None


def _verdict(summary: dict[str, Any], strict: bool) -> None:
    """The last line on stderr says the verdict; exit 0 identical / equivalent (1 with --strict),
    1 diverged / broken (audit.md)."""
    from service.app.verify import EQUIVALENT, IDENTICAL, verdict_line

    verdict = summary["verdict"]
    good = verdict == IDENTICAL or (verdict == EQUIVALENT and not strict)
    console.print(verdict_line(summary), style="green" if good else "red", markup=False, highlight=False,
                  soft_wrap=True)
    if not good:
        raise typer.Exit(BROKEN)


@friendly
def export(cluster: str = ClusterOpt,
           until: int | None = UntilOpt,
           database_url: str | None = DbOpt, server: str | None = ServerOpt, token: str | None = TokenOpt) -> None:
    """Write the cluster's events as JSON lines (stdout)."""
    check_cluster(cluster)
    check_until(until)
    if (remote := server_of(server, database_url)) is not None:
        from service.cli import remote_audit

        remote_audit.export(remote, cluster, token, until)
        return
    from service.bootstrap import service_for
    from service.store.base import canonical_json

    url = db(database_url, reads=True)
    for env in asyncio.run(_envelopes(url, cluster, until))[0]:
        sys.stdout.write(canonical_json(env) + "\n")

    async def checked() -> tuple[Any, list[Any]]:
        async with service_for(url) as service:
            return await service.store.verify(cluster, until), await service.store.checkpoints(cluster, until)

    verified, checkpoints = asyncio.run(checked())
    for cp in checkpoints:  # audit.md: an export carries the signed checkpoints, as ChainCheckpoint lines
        sys.stdout.write(cp.record_json() + "\n")
    sys.stdout.flush()
    if not verified.ok:
        broken(verified.first_bad_position)

