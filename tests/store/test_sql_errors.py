"""How the SQL store classifies a driver's failures (service/store/sql_errors.py): by the whole
cause chain, so that a database restart is a 503 (StoreUnavailable), never a 500."""
from __future__ import annotations

import asyncpg
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_dbapi

from service.store import StoreError, StoreUnavailable
from service.store.sql_errors import is_unavailable, translate, unavailable_when_closed


def _raised_from(outer: Exception, inner: BaseException) -> Exception:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except Exception as caught:
        return caught


def test_the_asyncpg_adapters_error_is_walked_to_its_cause() -> None:
    """SQLAlchemy's asyncpg adapter raises its own Error (no DBAPIError) from CannotConnectNowError
    while the server starts or stops."""
    cause = asyncpg.exceptions.CannotConnectNowError("the database system is starting up")
    adapter_error = _raised_from(AsyncAdapt_asyncpg_dbapi.Error("the database system is starting up"), cause)
    assert not isinstance(adapter_error, sa.exc.DBAPIError)
    assert is_unavailable(adapter_error)
    assert isinstance(translate(adapter_error), StoreUnavailable)
    assert is_unavailable(_raised_from(StoreError("while connecting"), adapter_error))  # one link further
    try:  # a bug's exception raised while handling one: its context is not the cause
        try:
            raise adapter_error
        except Exception:
            raise ValueError("a bug") from None
    except ValueError as bug:
        assert not is_unavailable(bug)
    dbapi = sa.exc.DBAPIError("SELECT 1", None, adapter_error)  # and inside SQLAlchemy's DBAPIError
    assert is_unavailable(dbapi)


def test_an_ordinary_database_error_stays_a_store_error() -> None:
    error = sa.exc.ProgrammingError("SELECT nope", None, asyncpg.exceptions.UndefinedColumnError("no column"))
    assert not is_unavailable(error)
    translated = translate(error)
    assert isinstance(translated, StoreError) and not isinstance(translated, StoreUnavailable)


@pytest.mark.parametrize("closed", [True, False])
def test_an_internal_client_error_is_unavailable_when_its_connection_closed(closed: bool) -> None:
    error = asyncpg.exceptions._base.InternalClientError("waiter is not done while handling critical protocol error")
    result = unavailable_when_closed(error, closed)
    assert isinstance(result, StoreUnavailable) if closed else result is error
    assert unavailable_when_closed(ValueError("a bug"), True).__class__ is ValueError  # not a driver's
