"""The composition root: the one place that wires the store, the application, HTTP and Kafka.

`gangplank serve` runs `build_app`; every other CLI command opens the application with
`open_service` (or `service_for`, which closes it after), and `migrate` brings the schema up.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import structlog

from service.app.service import Gangplank
from service.config import Settings
from service.store import open_store

if TYPE_CHECKING:
    from litestar import Litestar

    from service.api.settings import ApiSettings
    from service.ownership import Ownership

log = structlog.get_logger("gangplank")


def build_service(settings: Settings) -> Gangplank:
    from service.app.checkpoints import Signer

    signer = Signer.from_file(settings.signing_key) if settings.signing_key else None  # read at start
    store = open_store(settings.database_url)
    outbox = settings.decisions_topic if settings.kafka_bootstrap else None
    return Gangplank(store, outbox_topic=outbox, snapshot_every=settings.snapshot_every, signer=signer,
                     checkpoint_events=settings.checkpoint_events, checkpoint_seconds=settings.checkpoint_seconds)


def open_service(database_url: str) -> Gangplank:
    """The application over the store at `database_url`, for a CLI command (no Kafka)."""
    return build_service(Settings.from_env(database_url=database_url))


@asynccontextmanager
async def service_for(database_url: str) -> AsyncIterator[Gangplank]:
    """open_service, closed after."""
    service = open_service(database_url)
    try:
        yield service
    finally:
        await service.close()


async def migrate(database_url: str) -> None:
    """The schema to the latest migration."""
    from service.store.migrate import upgrade

    await upgrade(database_url)


def build_app(settings: Settings, api_settings: ApiSettings | None = None) -> Litestar:
    """The ASGI app with lifespan-managed resources: migrations, Kafka, the store."""
    from service.api.app import create_app
    from service.api.settings import ApiSettings

    service = build_service(settings)
    api_settings = api_settings or ApiSettings.from_tokens_file(settings.tokens_file)
    ownership = _ownership(settings, service)
    app = create_app(service, api_settings, ownership=ownership)
    runtime: dict[str, Any] = {}

    async def sign_on_time() -> None:  # at least once every checkpoint_seconds while events arrive
        checkpoints = service.checkpoints
        while True:
            await asyncio.sleep(min(1.0, checkpoints.seconds))
            await checkpoints.tick()

    async def startup() -> None:
        if settings.migrate:
            await migrate(settings.database_url)
        if ownership is not None:  # joins after migrations, before /readyz says ready
            from service.store.membership import DuplicateReplica
            try:
                await ownership.start()
            except DuplicateReplica as exc:
                app.state[EXIT_KEY] = f"error: {exc}"
                raise
        if settings.kafka_bootstrap:
            from service.kafka.runtime import start_kafka
            runtime["kafka"] = await start_kafka(service, settings)
        if service.checkpoints.enabled:
            runtime["checkpoints"] = asyncio.get_running_loop().create_task(sign_on_time())
        log.info("gangplank.started", database=_safe_url(settings.database_url), replica=settings.replica_id,
                 kafka=settings.kafka_bootstrap, auth="none" if api_settings.is_open else "bearer",
                 signing=service.checkpoints.signer.key_id if service.checkpoints.signer else None)

    async def shutdown() -> None:
        if ownership is not None:  # hand the clusters over while the API still answers
            await ownership.leave()
        timer = runtime.pop("checkpoints", None)
        if timer is not None:
            timer.cancel()
            await service.checkpoints.flush()
        kafka = runtime.pop("kafka", None)
        if kafka is not None:
            await kafka.stop()
        if ownership is not None:
            await ownership.close()
        await service.close()

    app.on_startup.append(startup)
    app.on_shutdown.append(shutdown)
    return app


EXIT_KEY = "gangplank.exit"  # a message for `serve` to exit with (status 2) when startup failed


def _ownership(settings: Settings, service: Gangplank) -> Ownership | None:
    """On PostgreSQL, `serve` is a replica among others (docs/replicas.md): its membership, its
    clusters, the fence of every turn. Elsewhere (SQLite, memory) the one process owns everything."""
    if not settings.replica_id or not settings.database_url.startswith("postgresql"):
        return None
    from service.ownership import Ownership
    from service.store.membership import Membership
    from service.store.postgres import PostgresEventStore

    assert isinstance(service.store, PostgresEventStore)
    membership = Membership(settings.database_url, settings.replica_id, settings.advertise_url or "",
                            settings.replica_lease_ms)
    ownership = Ownership(membership, service)
    service.store.fencing = ownership
    service.store.fence_idle_ms = settings.replica_lease_ms
    service.commands.fencing = ownership
    service.queries.replica_live = ownership.live
    return ownership


def _safe_url(url: str) -> str:
    """The URL without a password, for logs."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}@{host}"
    return url
