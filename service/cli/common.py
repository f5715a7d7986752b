"""What every `gangplank` command that reads or writes the store shares: the options, the exit codes,
one-line failures without a traceback, and the checks of a database URL, a cluster name and a position."""
from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console

from service.config import default_database_url

# Exit codes (docs/audit.md): 0 done (and everything checked out), 1 verification failed (a broken chain,
# a decision that differs) or no such workload, 2 the command cannot run, or the cluster has no events.
BROKEN, CANNOT_RUN = 1, 2
NO_EVENTS = 2

console = Console(stderr=True)
out = Console()

DbOpt = typer.Option(None, "--database-url", metavar="URL",
                     help="SQLAlchemy URL of the store, e.g. postgresql+asyncpg://user@host/db "
                          "(env GANGPLANK_DATABASE_URL; default: the SQLite file gangplank.db here)")
ClusterOpt = typer.Option("default", "--cluster", metavar="NAME", envvar="GANGPLANK_CLUSTER",
                          help="The cluster whose stream to read (env GANGPLANK_CLUSTER; default: default).")
ServerOpt = typer.Option(None, "--server", metavar="URL",
                         help="Read the cluster over this server's HTTP API (env GANGPLANK_SERVER; the default "
                              "without --database-url or GANGPLANK_DATABASE_URL: http://127.0.0.1:8000).")
TokenOpt = typer.Option(None, "--token", metavar="TOKEN", envvar="GANGPLANK_TOKEN",
                        help="The bearer token for --server (env GANGPLANK_TOKEN).")
DEFAULT_SERVER = "http://127.0.0.1:8000"
UntilOpt = typer.Option(None, "--until", metavar="N", help="Stop after the event at position N.")
PublicKeyOpt = typer.Option(None, "--public-key", metavar="FILE.pub",
                            help="Trust the signed checkpoints of this Ed25519 public key (gangplank keygen): each "
                                 "must be validly signed by it and name the chain's hash at its position.")
RequireOpt = typer.Option(False, "--require-checkpoints",
                          help="A stream without signed checkpoints is broken.")


def db(url: str | None, *, reads: bool = False) -> str:
    """The URL to use. An SQLite file is checked before it is opened: a read needs the file (opening
    would create an empty one), any command its directory (aiosqlite would fail in its worker
    thread, which can outlive asyncio.run and print a traceback)."""
    url = url or default_database_url()
    path = _sqlite_path(url)
    if path is not None:
        if reads and not path.is_file():
            fail(f"error: no database at {path} (run gangplank migrate, or give --database-url)")
        if not path.parent.is_dir():
            fail(f"error: cannot create {path}: directory {path.parent} does not exist")
    return url


def _sqlite_path(url: str) -> Path | None:
    """The file of an SQLite URL (relative to here with three slashes); None for other databases,
    in-memory ones and `file:` URIs."""
    from service.store.urls import sqlite_file

    return sqlite_file(url)


def fail(message: str, code: int = 2) -> NoReturn:
    console.print(message, markup=False, highlight=False, soft_wrap=True)  # one line, however long
    raise typer.Exit(code)


def server_of(server: str | None, database_url: str | None, from_file: str | None = None) -> str | None:
    """The server to read the cluster from, or None to read the store (or the export) itself: one
    address for every command (client.md). `--database-url` (or GANGPLANK_DATABASE_URL, when no
    --server is given) reads the store; otherwise `--server`, GANGPLANK_SERVER, or its default."""
    import os

    if server and (database_url or from_file):
        fail(f"error: give --server or {'--from-file' if from_file else '--database-url'}, not both")
    if from_file or database_url:
        return None
    if server:
        return server
    if os.environ.get("GANGPLANK_DATABASE_URL"):
        return None
    return os.environ.get("GANGPLANK_SERVER") or DEFAULT_SERVER


def no_events(cluster: str) -> NoReturn:
    fail(f"error: cluster {cluster!r} has no events", NO_EVENTS)  # nothing to check: not a broken chain


def check_cluster(cluster: str) -> None:
    from service.schemas.names import cluster_name_error

    if (reason := cluster_name_error(cluster)) is not None:
        fail(f"--cluster {cluster!r}: {reason}")


def check_until(until: int | None) -> None:
    if until is not None and until < 0:
        fail(f"--until {until}: must be a position (0 or more)")


def friendly(command: Callable[..., Any]) -> Callable[..., Any]:
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
            fail(f"error: {exc}")
        except Exception as exc:
            from service.app.audit import StreamOrderError
            from service.app.checkpoints import CheckpointMalformed, KeyFileError
            from service.app.verify import NewerRules
            from service.store.base import StoreError

            if isinstance(exc, (StreamOrderError, KeyFileError, CheckpointMalformed)):  # named as what they are
                fail(f"error: {exc}")
            if isinstance(exc, NewerRules):  # audit.md: cannot be re-decided by this code
                fail(f"error: {exc}", CANNOT_RUN)
            if isinstance(exc, StoreError):  # the store translates its driver's errors
                if (missing := re.search(r"no such table: \w+", str(exc))) is not None:  # SQLite never migrated
                    fail(f"error: the database has no schema ({missing.group()}): "
                          f"run gangplank migrate --database-url {db(kwargs.get('database_url'))}")
                fail(f"error: the database cannot be used: {str(exc).splitlines()[0]}")
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
    bad = _chain_break(cluster, from_file, kwargs.get("database_url"))
    if bad is not None:
        broken(bad)
    if from_file and isinstance(exc, json.JSONDecodeError):
        fail(f"error: not JSON lines: {exc}")
    detail = str(exc) if isinstance(exc, ValueError) and not isinstance(exc, json.JSONDecodeError) \
        else f"{type(exc).__name__}: {exc}"
    fail(f"error: the stream of cluster {cluster!r} cannot be read: {detail}" if cluster and not from_file
         else f"error: {detail}")


def broken(position: int) -> NoReturn:
    fail(f"hash chain broken at position {position}: the record was altered or cut there", BROKEN)


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
            async with service_for(db(database_url, reads=True)) as service:
                store = service.store
                result = await store.verify(cluster)
                return None if result.ok else result.first_bad_position

        return asyncio.run(run())
    except Exception:  # the caller says what it could not read
        return None



def file_cluster(path: str) -> str:
    """The cluster of an export: the one its events name."""
    from service.app.audit import read_jsonl

    clusters = sorted({str(e.get("cluster")) for e in read_jsonl(path)})
    if not clusters:
        fail(f"error: {path} holds no events")
    if len(clusters) > 1:
        fail(f"error: {path} holds the events of clusters {', '.join(clusters)}: give --cluster")
    return clusters[0]

