"""The `gangplank` command (shared/spec/cli.md)."""
from __future__ import annotations

import asyncio
import collections
import errno
import functools
import gc
import json
import re
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import typer
import typer.core
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from service.cli.client_commands import register as register_client_commands
from service.config import Settings, default_database_url

# Exit codes (docs/audit.md): 0 done (and everything checked out), 1 verification failed (a broken chain,
# a decision that differs) or no such workload, 2 the command cannot run, or the cluster has no events.
BROKEN, CANNOT_RUN = 1, 2
NO_EVENTS = 2

app = typer.Typer(help="Gangplank: an event-sourced gang scheduler.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
audit_app = typer.Typer(help="Audit a cluster's stream.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")
register_client_commands(app)  # submit, get workloads, describe (service/cli/client_commands.py)
console = Console(stderr=True)
out = Console()

_typed = typer.core.TyperOption.display_type_rich


def _display_type(self: typer.core.TyperOption, ctx: Any) -> str | None:
    """No "<bool>" after a flag (typer shows one for --verify, --help): a flag takes no value; and
    no "<str>" after an argument, whose metavar says what it is."""
    return None if self.is_flag else _typed(self, ctx)


typer.core.TyperOption.display_type_rich = _display_type  # type: ignore[method-assign]
typer.core.TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign]


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        out.print(f"gangplank {version('gangplank')}", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _root(_: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit.")) -> None:
    """Gangplank: an event-sourced gang scheduler."""


DbOpt = typer.Option(None, "--database-url", metavar="URL",
                     help="SQLAlchemy URL of the store, e.g. postgresql+asyncpg://user@host/db "
                          "(env GANGPLANK_DATABASE_URL; default: the SQLite file gangplank.db here)")
ClusterOpt = typer.Option(..., "--cluster", metavar="NAME", help="The cluster whose stream to read.")
UntilOpt = typer.Option(None, "--until", metavar="N", help="Stop after the event at position N.")
PublicKeyOpt = typer.Option(None, "--public-key", metavar="FILE.pub",
                            help="Trust the signed checkpoints of this Ed25519 public key (gangplank keygen): each "
                                 "must be validly signed by it and name the chain's hash at its position.")
RequireOpt = typer.Option(False, "--require-checkpoints",
                          help="A stream without signed checkpoints is broken.")


def _db(url: str | None, *, reads: bool = False) -> str:
    """The URL to use. An SQLite file is checked before it is opened: a read needs the file (opening
    would create an empty one), any command its directory (aiosqlite would fail in its worker
    thread, which can outlive asyncio.run and print a traceback)."""
    url = url or default_database_url()
    path = _sqlite_path(url)
    if path is not None:
        if reads and not path.is_file():
            _fail(f"error: no database at {path} (run gangplank migrate, or give --database-url)")
        if not path.parent.is_dir():
            _fail(f"error: cannot create {path}: directory {path.parent} does not exist")
    return url


def _sqlite_path(url: str) -> Path | None:
    """The file of an SQLite URL (relative to here with three slashes); None for other databases,
    in-memory ones and `file:` URIs."""
    from service.store.urls import sqlite_file

    return sqlite_file(url)


def _fail(message: str, code: int = 2) -> NoReturn:
    console.print(message, markup=False, highlight=False, soft_wrap=True)  # one line, however long
    raise typer.Exit(code)


def _no_events(cluster: str) -> NoReturn:
    _fail(f"error: cluster {cluster!r} has no events", NO_EVENTS)  # nothing to check: not a broken chain


def _check_cluster(cluster: str) -> None:
    from service.schemas.names import cluster_name_error

    if (reason := cluster_name_error(cluster)) is not None:
        _fail(f"--cluster {cluster!r}: {reason}")


def _check_until(until: int | None) -> None:
    if until is not None and until < 0:
        _fail(f"--until {until}: must be a position (0 or more)")


def _friendly(command: Callable[..., Any]) -> Callable[..., Any]:
    """A command that cannot run (unreadable file, not JSON lines, a database that is not there,
    a bad URL) says why on stderr and exits 2, without a traceback; exit 1 stays the answer
    "verification failed" (or "not found")."""
    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except OSError as exc:
            _fail(f"error: {exc}")
        except Exception as exc:
            from service.app.audit import StreamOrderError
            from service.store.base import StoreError

            if isinstance(exc, StreamOrderError):
                _fail(f"error: {exc}")
            if isinstance(exc, StoreError):  # the store translates its driver's errors
                if (missing := re.search(r"no such table: \w+", str(exc))) is not None:  # SQLite never migrated
                    _fail(f"error: the database has no schema ({missing.group()}): "
                          f"run gangplank migrate --database-url {_db(kwargs.get('database_url'))}")
                _fail(f"error: the database cannot be used: {str(exc).splitlines()[0]}")
            if isinstance(exc, CONTENT_ERRORS):
                _unreadable(exc, kwargs)
            raise
    return run


# what folding or reading a record that is not what this code wrote raises (json's errors are ValueErrors)
CONTENT_ERRORS = (ValueError, LookupError, TypeError, AttributeError)


def _unreadable(exc: Exception, kwargs: dict[str, Any]) -> NoReturn:
    """A stream this code cannot read or fold: when its hash chain is broken, that is the answer
    (exit 1, as audit verify); else say what could not be read (exit 2)."""
    cluster, from_file = kwargs.get("cluster"), kwargs.get("from_file")
    broken = _chain_break(cluster, from_file, kwargs.get("database_url"))
    if broken is not None:
        _broken(broken)
    if from_file and isinstance(exc, json.JSONDecodeError):
        _fail(f"error: not JSON lines: {exc}")
    detail = str(exc) if isinstance(exc, ValueError) and not isinstance(exc, json.JSONDecodeError) \
        else f"{type(exc).__name__}: {exc}"
    _fail(f"error: the stream of cluster {cluster!r} cannot be read: {detail}" if cluster and not from_file
          else f"error: {detail}")


def _broken(position: int) -> NoReturn:
    _fail(f"hash chain broken at position {position}: the record was altered or cut there", BROKEN)


def _chain_break(cluster: str | None, from_file: str | None, database_url: str | None) -> int | None:
    """The first position where the chain is broken, or None when it holds (or cannot be checked)."""
    try:
        if from_file:
            from service.app.audit import chain_break, read_jsonl

            return chain_break(read_jsonl(from_file), cluster)
        if not cluster:
            return None
        from service.bootstrap import service_for

        async def run() -> int | None:
            async with service_for(_db(database_url, reads=True)) as service:
                store = service.store
                result = await store.verify(cluster)
                return None if result.ok else result.first_bad_position

        return asyncio.run(run())
    except Exception:  # the caller says what it could not read
        return None


@app.command()
def serve(host: str = typer.Option("127.0.0.1", "--host", metavar="HOST",
                                   help="Address to listen on (loopback only while no token is configured)."),
          port: int = typer.Option(8000, "--port", metavar="PORT", help="TCP port to listen on (0: any free one)."),
          database_url: str | None = DbOpt,
          kafka_bootstrap: str | None = typer.Option(
              None, "--kafka-bootstrap", metavar="HOST:PORT",
              help="Kafka bootstrap server: consume commands and relay decisions "
                   "(env GANGPLANK_KAFKA_BOOTSTRAP; default: no Kafka)"),
          tokens: str | None = typer.Option(
              None, "--tokens", metavar="FILE",
              help="Access tokens file, JSON as in tokens.example.json (env GANGPLANK_TOKENS: a path or the "
                   "JSON itself; default: none, the API is open on loopback only)"),
          no_migrate: bool = typer.Option(False, "--no-migrate", help="Do not apply pending migrations at start."),
          kafka_idempotence: bool | None = typer.Option(
              None, "--kafka-idempotence/--no-kafka-idempotence",
              help="Idempotent Kafka producer; turn off for brokers without InitProducerId, such as Tansu "
                   "(env GANGPLANK_KAFKA_IDEMPOTENCE; default: on)"),
          signing_key: str | None = typer.Option(
              None, "--signing-key", metavar="FILE",
              help="Ed25519 private key (PEM, PKCS#8; gangplank keygen): sign each cluster's chain head every "
                   "1,000 events and at least once a minute (env GANGPLANK_SIGNING_KEY, "
                   "GANGPLANK_CHECKPOINT_EVENTS, GANGPLANK_CHECKPOINT_SECONDS)"),
          replica_id: str | None = typer.Option(
              None, "--replica-id", metavar="ID",
              help="This replica's id, on every answer as Gangplank-Replica (env GANGPLANK_REPLICA_ID; default: "
                   "<host>-<port>-<6 random hex digits>, new at every start)"),
          advertise_url: str | None = typer.Option(
              None, "--advertise-url", metavar="URL",
              help="The base URL at which other replicas reach this one (env GANGPLANK_ADVERTISE_URL; "
                   "default: http://<host>:<port>, a wildcard host replaced by the host name)")) -> None:
    """Run the HTTP API (and the Kafka consumer and outbox relay with --kafka-bootstrap)."""
    import uvicorn

    from service.api.settings import ApiSettings, TokenFileError, resolve_bind_host
    from service.bootstrap import build_app
    from service.logging import configure_logging

    configure_logging()
    from service.gcpause import configure_for_serving
    configure_for_serving()  # short collector pauses for a long-lived decider (service/gcpause.py)
    settings = Settings.from_env(database_url=database_url, host=host, port=port, tokens_file=tokens,
                                 kafka_bootstrap=kafka_bootstrap, kafka_idempotence=kafka_idempotence,
                                 signing_key=signing_key, replica_id=replica_id, advertise_url=advertise_url)
    settings.migrate = not no_migrate
    from service.replica import ReplicaIdError, resolve_identity
    try:
        resolve_identity(settings)
    except ReplicaIdError as exc:
        _fail(f"error: {exc}")
    if settings.signing_key:
        from service.app.checkpoints import KeyFileError, Signer
        try:
            Signer.from_file(settings.signing_key)
        except KeyFileError as exc:
            _fail(f"error: {exc}")
    try:
        api_settings = ApiSettings.from_tokens_file(settings.tokens_file, replica_id=settings.replica_id or "")
    except TokenFileError as exc:  # its message never holds a token
        _fail(f"error: {exc}")
    _db(settings.database_url)  # an SQLite file's directory must exist
    bind = resolve_bind_host(api_settings, settings.host)
    sock = _listen(bind, settings.port)  # before anything starts: a port in use is one error, nothing logged
    application = build_app(settings, api_settings)
    url = _url(bind, sock.getsockname()[1])

    def announce() -> None:  # after the startup hooks (migrations, Kafka): the API answers now
        out.print(f"listening on {url} — API docs at /schema", markup=False, highlight=False, soft_wrap=True)

    application.on_startup.append(announce)
    # no proxy-header rewriting (nothing here reads client addresses): one middleware less per request;
    # log_config None: uvicorn's own lines go through the JSON logging configured above
    config = uvicorn.Config(application, host=bind, port=settings.port, log_level="warning", access_log=False,
                            proxy_headers=False, server_header=False, log_config=None)
    uvicorn.Server(config).run(sockets=[sock])


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (as uvicorn binds one), or one line and exit 2."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = "address already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        _fail(f"error: cannot listen on {_url(host, port)}: {reason}")
    sock.set_inheritable(True)
    return sock


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@app.command()
@_friendly
def migrate(database_url: str | None = DbOpt) -> None:
    """Bring the schema to the latest migration."""
    from service.bootstrap import migrate as upgrade

    url = _db(database_url)
    asyncio.run(upgrade(url))
    console.print("[green]schema is at the latest migration[/]")


@app.command()
@_friendly
def keygen(out_file: str = typer.Option(..., "--out", metavar="FILE",
                                        help="Where to write the private key (FILE) and the public key (FILE.pub).")
           ) -> None:
    """Write a new Ed25519 key pair for signed checkpoints (serve --signing-key FILE, verify --public-key FILE.pub)."""
    from service.app.checkpoints import keygen as make_keys

    key_id = make_keys(out_file)
    console.print(f"wrote {out_file} (private: keep it away from the database) and {out_file}.pub; "
                  f"key id {key_id}", markup=False, highlight=False, soft_wrap=True)


async def _envelopes(url: str, cluster: str, until: int | None, *,
                     lean: bool = False) -> tuple[list[dict[str, Any]], int]:
    """The cluster's envelopes and its recorded last position; `lean`: only what folding reads
    (position, type, schemaVersion, data), without metadata and hashes (a replay without --verify
    needs no more)."""
    from service.bootstrap import service_for

    async with service_for(url) as service:
        store = service.store
        if (last := await store.last_position(cluster)) == 0:
            _no_events(cluster)
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
    """The state from every event (no snapshot), folded the fast way (service.domain.replay:
    the same state) while the next batches are read; None when the stream is one the fast
    fold refuses (the caller folds every event instead)."""
    from operator import itemgetter

    from service.app.audit import ReplayResult
    from service.bootstrap import service_for
    from service.domain import ClusterState
    from service.domain import events as ev
    from service.domain.replay import ReplayError

    async def run() -> Any:
        async with service_for(url) as service:
            store = service.store
            last = await store.last_position(cluster)
            if last == 0:
                _no_events(cluster)
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


@app.command()
@_friendly
def replay(cluster: str | None = typer.Option(
               None, "--cluster", metavar="NAME",
               help="The cluster whose stream to replay (with --from-file: default, the file's cluster)."),
           until: int | None = UntilOpt,
           verify: bool = typer.Option(False, "--verify", help="Re-decide every input, compare every decision "
                                                               "byte for byte and recompute the hash chain."),
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
           database_url: str | None = DbOpt) -> None:
    """Rebuild a cluster's state from its events and print a summary (or, with --what-if, what would
    have happened under changes)."""
    if cluster is None:
        if not from_file:
            _fail("error: give --cluster NAME (or --from-file FILE, whose cluster is used)")
        cluster = _file_cluster(from_file)
    _check_cluster(cluster)
    _check_until(until)
    url = "" if from_file else _db(database_url, reads=True)
    if what_if is not None:
        _what_if(cluster, what_if, until, output, from_file, url, verify)
        return
    # One long fold that allocates much and frees little: the cyclic GC would rescan the growing
    # state over and over (as costly as the fold itself on a large cluster). Off for this command.
    gc.disable()
    try:
        _replay(cluster, until, verify, from_file, url, public_key if verify else None,
                require_checkpoints and verify)
    finally:
        gc.enable()


def _what_if(cluster: str, changes: str, until: int | None, output: str, from_file: str | None, url: str,
             verify: bool) -> None:
    from service.cli import whatif_cli

    if verify:
        _fail("error: --what-if and --verify are two commands: give one")
    if output not in ("table", "json"):
        _fail(f"--output {output!r}: must be table or json")
    gc.disable()  # one long fold, as replay (below)
    try:
        text = whatif_cli.run(cluster, changes, until, output, from_file, url)
    except whatif_cli.WhatIfFailed as exc:
        _fail(exc.line, exc.code)
    except whatif_cli.NoEvents:
        _no_events(cluster)
    finally:
        gc.enable()
    whatif_cli.write(text)


def _file_cluster(path: str) -> str:
    """The cluster of an export: the one its events name."""
    from service.app.audit import read_jsonl

    clusters = sorted({str(e.get("cluster")) for e in read_jsonl(path)})
    if not clusters:
        _fail(f"error: {path} holds no events")
    if len(clusters) > 1:
        _fail(f"error: {path} holds the events of clusters {', '.join(clusters)}: give --cluster")
    return clusters[0]


def _replay(cluster: str, until: int | None, verify: bool, from_file: str | None, url: str,
            public_key: str | None = None, require_checkpoints: bool = False) -> None:
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
            _no_events(cluster)
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
    if verify and not result.ok:
        where = min(p for p in (result.first_bad_hash, result.first_mismatch) if p is not None)
        console.print(f"[red]verification failed at position {where}[/]")
        raise typer.Exit(BROKEN)
    if verify:
        console.print(f"[green]verified: {result.events} events reproduced byte for byte, chain intact[/]")


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
        if result.chain_ok or report.first_bad_position < (result.first_bad_hash or 0):
            result.chain_ok, result.first_bad_hash = False, report.first_bad_position
    return report


@app.command()
@_friendly
def export(cluster: str = ClusterOpt,
           until: int | None = UntilOpt,
           database_url: str | None = DbOpt) -> None:
    """Write the cluster's events as JSON lines (stdout)."""
    _check_cluster(cluster)
    _check_until(until)
    from service.bootstrap import service_for
    from service.store.base import canonical_json

    url = _db(database_url, reads=True)
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
        _broken(verified.first_bad_position)


@audit_app.command("verify")
@_friendly
def audit_verify(cluster: str = ClusterOpt, public_key: str | None = PublicKeyOpt,
                 require_checkpoints: bool = RequireOpt, database_url: str | None = DbOpt) -> None:
    """Check the hash chain (and the signed checkpoints); exit 1 naming the first bad position."""
    _check_cluster(cluster)
    from service.bootstrap import service_for

    url = _db(database_url, reads=True)

    async def run() -> Any:
        from service.cli.checkpoint_cli import check_store

        async with service_for(url) as service:
            store = service.store
            verified = await store.verify(cluster)
            reached = verified.events if verified.ok else (verified.first_bad_position or 1) - 1
            return verified, await check_store(store, cluster, reached, public_key, require_checkpoints)

    result, report = asyncio.run(run())
    ok, bad = result.ok, result.first_bad_position
    if report.first_bad_position is not None and (ok or report.first_bad_position < (bad or 0)):
        ok, bad = False, report.first_bad_position
    # what GET /audit/verify answers (also for a cluster with no events), with the checkpoints
    body: dict[str, Any] = {"ok": ok, "events": result.events, "head": result.head}
    if not ok:
        body["firstBadPosition"] = bad
    if report.count or public_key or require_checkpoints:
        body["checkpoints"] = report.as_json()
    out.print_json(json.dumps(body))
    if result.ok and result.events == 0 and ok:  # a broken chain counts its good events: none means none recorded
        _no_events(cluster)
    if not ok:
        detail = f": {report.problem}" if bad == report.first_bad_position else ""
        console.print(f"hash chain broken at position {bad}{detail}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(BROKEN)


@audit_app.command("explain")
@_friendly
def audit_explain(workload: str = typer.Argument(..., metavar="NAMESPACE/NAME",
                                                 help="The workload, e.g. team-a/train-7."),
                  cluster: str = ClusterOpt,
                  database_url: str | None = DbOpt) -> None:
    """The workload's history in words: submitted, why it waited, where it ran, who preempted it,
    what freed its room, and where it stands now. Checks the hash chain first."""
    from service.app.audit import causation_positions, explain
    from service.bootstrap import service_for

    _check_cluster(cluster)
    if "/" not in workload:
        _fail("error: give the workload as NAMESPACE/NAME")
    namespace, name = workload.split("/", 1)
    url = _db(database_url, reads=True)

    async def run() -> Any:
        async with service_for(url) as service:
            store = service.store
            # an explanation read from an altered record would be no explanation: the chain first
            # (over the stored texts: a hash per event, no decoding)
            checked = await store.verify(cluster)
            if not checked.ok and checked.first_bad_position is not None:
                _broken(checked.first_bad_position)
            if checked.events == 0:
                _no_events(cluster)
            history = await service.queries.history(cluster, namespace, name)
            if history is None:
                return None, {}
            causes = {}
            for position in causation_positions(history["events"]):
                found = await store.read(cluster, after=position - 1, limit=1)
                if found:
                    causes[position] = found[0].envelope()
            return history, causes

    history, causes = asyncio.run(run())
    if history is None:
        _fail(f"error: workload {namespace}/{name} not found in cluster {cluster}", 1)
    for line in explain(namespace, name, history["events"], causes):
        # markup off: "[#12]" (the position) and any bracket in a message are text, not rich styles
        out.print(line, markup=False, highlight=False, soft_wrap=True)


def main() -> None:  # pragma: no cover - `python -m service`
    app()
