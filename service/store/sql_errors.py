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


def is_unavailable(exc: BaseException) -> bool:
    """Does this error mean "the database cannot be reached right now"?"""
    if isinstance(exc, sa.exc.TimeoutError):  # no connection from the pool in time
        return True
    if isinstance(exc, sa.exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        message = str(exc.orig).lower()
        if "database is locked" in message or "unable to open database" in message:
            return True
        chain: BaseException | None = exc.orig
        while chain is not None:
            if isinstance(chain, DRIVER_UNAVAILABLE):
                return True
            chain = chain.__cause__
        return False
    return isinstance(exc, DRIVER_UNAVAILABLE)


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
