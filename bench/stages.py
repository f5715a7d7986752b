"""Where a command's time goes, stage by stage: timers wrapped around the service's own functions.

`install()` replaces a handful of functions of the HTTP adapter, the command handler and the
store's turn with timed wrappers (perf_counter; the service's code is not changed); `report()`
gives, per stage, its calls, total and mean wall time, and the share of the process's CPU. Used by

    .venv/bin/python bench/http_load.py --skip-replay --stages          # the server runs under it
    .venv/bin/python bench/kafka.py --stream light --stages             # in process

Stages (nested stages are inside their parents: `decide` is part of `batch`):
- `http.app`: the Litestar application per request (middleware, routing, parameters, the route);
  what uvicorn does around it (parsing, writing) is the server CPU outside every stage;
- `http.read+validate`: body read, JSON decoding and the models (service/schemas/validate.py);
- `http.execute`: the route's wait for the command handler (queue + the batch it joins);
- `http.encode`: the answer's status, problem document and bytes;
- `batch`: one unit of work (CommandHandler._commit_once) for the submissions queued then;
- `batch.turn-begin`: a pooled connection, BEGIN and the cluster's writer lock;
- `batch.start`: head, idempotency keys and missed events, read in the turn;
- `batch.decide`: accept + the decider's pass for every submission (`batch.decide.handle`: the
  decider alone; `batch.decide.view`: the answer's view);
- `batch.append`: the append statement; `batch.commit`: COMMIT (the WAL flush);
- `batch.after`: snapshots and checkpoints after the commit.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_TOTALS: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])  # stage -> [calls, seconds]
_BATCH_SIZES: list[int] = []
_STARTED = time.perf_counter()
_CPU0 = time.process_time()


def _add(stage: str, seconds: float) -> None:
    entry = _TOTALS[stage]
    entry[0] += 1
    entry[1] += seconds


def _timed_sync(stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _add(stage, time.perf_counter() - t)
    return wrapper


def _timed_async(stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            _add(stage, time.perf_counter() - t)
    return wrapper


def _patch(owner: Any, name: str, stage: str) -> None:
    fn = getattr(owner, name)
    import inspect
    wrap = _timed_async if inspect.iscoroutinefunction(fn) else _timed_sync
    setattr(owner, name, wrap(stage, fn))


def install() -> None:
    """Wrap the stages' functions (idempotent per process: call once, before serving)."""
    from litestar import Litestar

    from service.api import routes
    from service.app import handler
    from service.app.handler import CommandHandler
    from service.store import postgres, sqlite

    _time_http_scopes(Litestar)
    _patch(routes, "validate_body", "http.read+validate")
    _patch(routes, "result_response", "http.encode")
    _patch(CommandHandler, "execute", "http.execute")
    _patch(CommandHandler, "_commit_once", "batch")
    _patch(CommandHandler, "_answer_stored_keys", "batch.start")
    _patch(CommandHandler, "_decide_all", "batch.decide")
    _patch(handler, "handle", "batch.decide.handle")
    _patch(handler, "_answer_view", "batch.decide.view")
    _patch(CommandHandler, "_append", "batch.append")
    _patch(handler.Snapshotter, "after_commit", "batch.after")
    _patch(handler.Checkpointer, "after_commit", "batch.after")

    original_commit_once = CommandHandler._commit_once

    async def commit_once(self: Any, cluster: str, work: Any) -> Any:
        _BATCH_SIZES.append(len(work.flat))
        return await original_commit_once(self, cluster, work)
    CommandHandler._commit_once = commit_once  # type: ignore[method-assign]

    for store_cls in (postgres.PostgresEventStore, sqlite.SqliteEventStore):
        _time_turn(store_cls)


def _time_http_scopes(app_cls: Any) -> None:
    """The application per HTTP request (its lifespan is one long call: not a stage)."""
    original = app_cls.__call__

    async def call(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await original(self, scope, receive, send)
        t = time.perf_counter()
        try:
            await original(self, scope, receive, send)
        finally:
            _add("http.app", time.perf_counter() - t)
    app_cls.__call__ = call


def _time_turn(store_cls: Any) -> None:
    """`exclusive(cluster)`: the time to enter it (connection, BEGIN, lock) and to leave it (COMMIT)."""
    original = store_cls.exclusive

    @contextlib.asynccontextmanager
    async def exclusive(self: Any, cluster: str) -> AsyncIterator[Any]:
        manager = original(self, cluster)
        t = time.perf_counter()
        turn = await manager.__aenter__()
        _add("batch.turn-begin", time.perf_counter() - t)
        try:
            yield turn
        except BaseException:
            if not await manager.__aexit__(*sys.exc_info()):
                raise
        else:
            t = time.perf_counter()
            await manager.__aexit__(None, None, None)
            _add("batch.commit", time.perf_counter() - t)
    store_cls.exclusive = exclusive


def report() -> dict[str, Any]:
    wall, cpu = time.perf_counter() - _STARTED, time.process_time() - _CPU0
    stages = {name: {"calls": int(calls), "total_s": round(total, 3),
                     "mean_ms": round(total / calls * 1000, 3) if calls else 0.0}
              for name, (calls, total) in sorted(_TOTALS.items())}
    sizes = _BATCH_SIZES
    return {"process_wall_s": round(wall, 2), "process_cpu_s": round(cpu, 2), "stages": stages,
            "batches": len(sizes), "submissions_per_batch": round(sum(sizes) / len(sizes), 2) if sizes else 0,
            "batch_size_max": max(sizes, default=0)}


def reset() -> None:
    """Forget what was timed so far (the setup before the measured run)."""
    global _STARTED, _CPU0
    _TOTALS.clear()
    _BATCH_SIZES.clear()
    _STARTED, _CPU0 = time.perf_counter(), time.process_time()


def _serve(out: str, argv: list[str]) -> None:
    """`gangplank serve` under the timers; the report is written to `out` at exit, and the
    timers are reset when the process receives SIGUSR1 (the bench's measured run begins)."""
    import signal

    sys.path.insert(0, str(ROOT))
    install()
    frozen: list[dict[str, Any]] = []
    signal.signal(signal.SIGUSR1, lambda *_: reset())
    signal.signal(signal.SIGUSR2, lambda *_: frozen.append(report()))
    atexit.register(lambda: Path(out).write_text(json.dumps(frozen[-1] if frozen else report(), indent=1)))
    from service.cli.main import app
    app(args=argv, prog_name="gangplank")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[2] != "--":
        raise SystemExit("usage: python bench/stages.py REPORT.json -- serve [serve options]")
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
    os.environ.setdefault("PYTHONHASHSEED", "0")
    _serve(sys.argv[1], sys.argv[3:])
