"""`gangplank replay` (a summary, `--verify`, `--what-if`) and `gangplank export`: a cluster's stream
read from the store or an export, folded, re-decided and checked (audit.md)."""
from __future__ import annotations

import asyncio
import collections
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


async def _recorded_head(store: Any, cluster: str, position: int) -> str:
    """The hash recorded on event `position` (as stored, not recomputed), or the genesis hash."""
    from service.store.base import GENESIS_HASH

    if position <= 0:
        return GENESIS_HASH
    last = await store.read(cluster, after=position - 1, limit=1)
    return last[0].hash if last else GENESIS_HASH


def _fast_replay(url: str, cluster: str, until: int | None) -> Any:
    """The state from every event (no snapshot), folded the fast way (service.domain.fold.fast:
    the same state) while the next batches are read; None when the stream is one the fast
    fold refuses (the caller folds every event instead)."""
    from operator import itemgetter

    from service.app.audit import ReplayResult
    from service.bootstrap import service_for
    from service.domain import ClusterState
    from service.domain.fold.fast import ReplayError
    from service.domain.model import events as ev

    async def run() -> Any:
        async with service_for(url) as service:
            store = service.store
            last = await store.last_position(cluster)
            if last == 0:
                no_events(cluster)
            total = last if until is None else min(last, until)
            result = ReplayResult(ClusterState(cluster))
            counts: collections.Counter[str] = collections.Counter()
            with Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=console, transient=True, disable=not console.is_terminal) as bar:
                task = bar.add_task("replay", total=total)

                def seen(batch: list[Any]) -> None:
                    counts.update(map(itemgetter(1), batch))
                    bar.update(task, completed=batch[-1][0])

                try:
                    await service.cache.fold_fast(result.state, until, observe=seen)
                except ReplayError:
                    return None
            result.by_type = dict(counts)
            result.events = sum(counts.values())
            result.inputs = sum(n for t, n in counts.items() if t in ev.INPUT_TYPES)
            result.decisions = result.events - result.inputs
            if result.events != result.state.position:
                return None  # a gap: the plain fold says where
            result.head = await _recorded_head(store, cluster, result.state.position)
            return result

    return asyncio.run(run())


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
    from service.app.audit import read_jsonl
    from service.app.audit import replay as run_replay

    asked_until = until  # an export's own end is set below: its checkpoints after it still count
    if not verify and not from_file:
        result = _fast_replay(url, cluster, until)
        if result is not None:
            summary = result.summary()  # before the GC is back: a first collection would scan the whole state
            out.print_json(json.dumps(summary))
            return
    if from_file:
        envelopes: Any = [e for e in read_jsonl(from_file) if e.get("cluster", cluster) == cluster]
        if not envelopes:
            no_events(cluster)
        if until is None:
            # an export may end between an input and its decisions (`export --until N`): check the
            # positions the file holds, as --until does
            until = max(e["position"] for e in envelopes)
        last = None
    else:
        envelopes, last = asyncio.run(_envelopes(url, cluster, until, lean=not verify))
    total = envelopes[-1]["position"] if envelopes else 0
    if until is not None:
        total = min(total, until)
    with Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("replay", total=total)
        result = run_replay(envelopes, cluster, verify=verify, until=until, last=last,
                            progress=lambda p: bar.update(task, completed=p) if p % 1000 == 0 else None)
    if not verify and not from_file:  # lean envelopes carry no hashes
        async def head() -> str:
            from service.bootstrap import service_for
            async with service_for(url) as service:
                store = service.store
                return await _recorded_head(store, cluster, result.state.position)
        result.head = asyncio.run(head())
    summary = result.summary()
    if verify:
        report = _replay_checkpoints(result, envelopes, cluster, asked_until, from_file, url, public_key,
                                     require_checkpoints)
        summary = result.summary()
        if report.count or public_key or require_checkpoints:  # an unsigned stream's report is as before
            summary["checkpoints"] = report.as_json()
    out.print_json(json.dumps(summary))
    if verify:
        _verdict(summary, strict)
        if report.another_key and report.first_bad_position is not None:
            console.print("the checkpoints are not trusted: signed by another key", style="red", markup=False,
                          highlight=False, soft_wrap=True)
            raise typer.Exit(BROKEN)


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


def _replay_checkpoints(result: Any, envelopes: list[dict[str, Any]], cluster: str, until: int | None,
                        from_file: str | None, url: str, public_key: str | None, require: bool) -> Any:
    """Check the signed checkpoints against the chain the verification recomputed; a failing one
    breaks the verdict (audit.md, *Signed checkpoints*)."""
    from service.cli.checkpoint_cli import check_envelopes, check_store, file_checkpoints

    reached = result.events if result.chain_ok else (result.first_bad_hash or 1) - 1
    if from_file:
        report = check_envelopes(file_checkpoints(from_file, cluster), envelopes, reached, public_key, require,
                                 until)
    else:
        async def run() -> Any:
            from service.bootstrap import service_for
            async with service_for(url) as service:
                return await check_store(service.store, cluster, reached, public_key, require, until)
        report = asyncio.run(run())
    if report.first_bad_position is not None:
        console.print(report.problem, markup=False, highlight=False, soft_wrap=True)
        if report.another_key and result.chain_ok:
            pass  # the chain is intact: the checkpoints are not trusted, and the verification fails (_replay)
        elif result.chain_ok or report.first_bad_position < (result.first_bad_hash or 0):
            result.chain_ok, result.first_bad_hash = False, report.first_bad_position
    return report


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

