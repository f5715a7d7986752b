"""What the SQL store does with driver failures and cancellation: connection-level errors
become StoreUnavailable (no driver exception type leaves service/store/), and a cancelled
write still finishes its transaction."""
from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg
import sqlalchemy as sa

from .base import ConcurrencyConflict, IdempotencyKeyTaken, StoreError, StoreUnavailable


def constraint_name(exc: BaseException) -> str | None:
    """The violated constraint of a driver (or SQLAlchemy-wrapped) integrity error."""
    for candidate in (exc, getattr(exc, "orig", None), getattr(getattr(exc, "orig", None), "__cause__", None)):
        name = getattr(candidate, "constraint_name", None)
        if name:
            return str(name)
    return None


DRIVER_UNAVAILABLE = (OSError, ConnectionError, asyncio.TimeoutError, asyncpg.PostgresConnectionError,
                       asyncpg.InterfaceError, asyncpg.exceptions.OperatorInterventionError)
# What a driver or SQLAlchemy raises (as opposed to the store's own exceptions, or a bug's)
DRIVER_ERRORS = (sa.exc.SQLAlchemyError, sa.exc.EmulatedDBAPIException, asyncpg.PostgresError,
                 asyncpg.InterfaceError, asyncpg.exceptions._base.InternalClientError, OSError)
_UNAVAILABLE_TEXTS = ("database is locked", "unable to open database")  # SQLite past its busy timeout


def causes(exc: BaseException) -> list[BaseException]:
    """The exception and every one it was raised from: SQLAlchemy's `orig`, `__cause__`, and the
    `__context__` of a driver's exceptions (SQLAlchemy's asyncpg adapter raises its own `Error`
    from the asyncpg one, and that `Error` is no DBAPIError)."""
    seen: list[BaseException] = []
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        pending += [getattr(current, "orig", None), current.__cause__]
        if isinstance(current, DRIVER_ERRORS):
            pending.append(current.__context__)
    return seen


def is_unavailable(exc: BaseException) -> bool:
    """Does this error mean "the database cannot be reached right now"? Decided by the whole
    cause chain (causes()): any link that is a lost or refused connection, a server shutting down
    or starting (CannotConnectNowError), an invalidated connection, a pool timeout, or SQLite's
    lock past its busy timeout."""
    for link in causes(exc):
        if isinstance(link, sa.exc.TimeoutError):  # no connection from the pool in time
            return True
        if isinstance(link, sa.exc.DBAPIError) and link.connection_invalidated:
            return True
        if isinstance(link, DRIVER_UNAVAILABLE):
            return True
        if isinstance(link, DRIVER_ERRORS) and any(t in str(link).lower() for t in _UNAVAILABLE_TEXTS):
            return True
    return False


def unavailable_when_closed(exc: BaseException, closed: bool) -> BaseException:
    """A driver's failure on a connection that is closed afterwards is the connection's loss,
    whatever the driver called it (a turn or statement cut off by a database restart)."""
    if closed and isinstance(exc, DRIVER_ERRORS) and not isinstance(exc, StoreError):
        return StoreUnavailable(f"the connection closed: {type(exc).__name__}: {exc}")
    return exc


_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])


def translate(exc: Exception) -> Exception:
    """The store's own exception for a driver's: StoreUnavailable for connection-level failures
    (and a schema not migrated: nothing the caller can fix but retry later), StoreError for any
    other database error; anything else unchanged."""
    if isinstance(exc, (ConcurrencyConflict, IdempotencyKeyTaken, StoreError)):
        return exc
    if is_unavailable(exc) or _schema_missing(exc):
        return StoreUnavailable(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, (sa.exc.SQLAlchemyError, asyncpg.PostgresError, asyncpg.InterfaceError)):
        return StoreError(f"{type(exc).__name__}: {exc}")
    return exc


def _schema_missing(exc: BaseException) -> bool:
    """`serve --no-migrate` on an empty database: a table the schema has is not there."""
    orig = getattr(exc, "orig", None)
    if isinstance(exc, asyncpg.exceptions.UndefinedTableError) or \
            isinstance(getattr(orig, "__cause__", None), asyncpg.exceptions.UndefinedTableError):
        return True
    return isinstance(exc, sa.exc.OperationalError) and "no such table" in str(exc)


def translating(method: _F) -> _F:
    """Raise the store's own exceptions (see translate) for the driver's."""
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except Exception as exc:
            translated = translate(exc)
            if translated is exc:
                raise
            raise translated from exc
    return wrapper  # type: ignore[return-value]


_running_writes: set[asyncio.Task[Any]] = set()


def finishes_when_cancelled(method: _F) -> _F:
    """Run a write in its own task, shielded: cancelling the caller (client gone, shutdown)
    lets the transaction finish, committed or rolled back, instead of abandoning a connection
    mid-transaction (which on SQLite would keep the database write-locked). The caller still
    gets CancelledError, once the write has finished; the write may have been committed."""
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        task = asyncio.ensure_future(method(*args, **kwargs))
        _running_writes.add(task)
        task.add_done_callback(_running_writes.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                await asyncio.wait([task])
            raise
    return wrapper  # type: ignore[return-value]
