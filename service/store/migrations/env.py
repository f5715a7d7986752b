"""Alembic environment for the Gangplank event store (async engines).

Used two ways:
- programmatically by service.store.migrate.upgrade(), which passes an open connection in
  config.attributes["connection"];
- from the command line: `alembic -c service/store/migrations/alembic.ini upgrade head` with the URL in
  `-x url=...` or GANGPLANK_DATABASE_URL.
"""
from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy.engine import Connection

from service.store.schema import metadata as target_metadata

config = context.config


def _do_run_migrations(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or os.environ.get("GANGPLANK_DATABASE_URL") \
        or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: pass -x url=... or set GANGPLANK_DATABASE_URL")
    return url


async def _run_async_migrations() -> None:
    from service.store.engine import make_engine

    engine = make_engine(_url())
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_do_run_migrations)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    connection = config.attributes.get("connection")
    if connection is None:
        asyncio.run(_run_async_migrations())
    else:
        _do_run_migrations(connection)
