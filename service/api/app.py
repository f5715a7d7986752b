"""The Litestar application of http.md."""
from __future__ import annotations

import time
from typing import Any

from litestar import Litestar
from litestar.openapi import OpenAPIConfig
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from service.api.auth import Authorizer
from service.api.openapi import render_plugins
from service.api.responses import EXCEPTION_HANDLERS
from service.api.routes import STATE_KEY, route_handlers
from service.api.settings import ApiSettings
from service.app.service import Gangplank
from service.api.metrics import HTTP_REQUEST_DURATION, UNMATCHED_ROUTE
from service.metrics import REQUESTS

API_VERSION = "1"


async def _count_response(message: Message, scope: Scope) -> None:
    """Every answer, including 404s of unknown routes, counted by route template and status."""
    if message["type"] == "http.response.start" and scope.get("type") == "http":
        route = scope.get("path_template") or UNMATCHED_ROUTE
        REQUESTS.labels(scope.get("method", ""), route, str(message["status"])).inc()


def _timing_middleware(app: ASGIApp) -> ASGIApp:
    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        started = time.perf_counter()
        try:
            await app(scope, receive, send)
        finally:
            HTTP_REQUEST_DURATION.labels(scope.get("method", ""), scope.get("path_template") or UNMATCHED_ROUTE) \
                .observe(time.perf_counter() - started)
    return middleware


def _without_empty_query_values(app: ASGIApp) -> ASGIApp:
    """`?limit=&phase=` is as if the parameters were not given (Kubernetes reads an empty `?limit=` or
    `?labelSelector=` so; http.md writes the list as `/workloads?namespace=&phase=&limit=&after=`)."""
    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        query = scope.get("query_string") or b""
        if query and scope["type"] == "http":
            pairs = query.split(b"&")
            kept = [p for p in pairs if p.partition(b"=")[2]]
            if len(kept) != len(pairs):
                scope["query_string"] = b"&".join(kept)
        await app(scope, receive, send)
    return middleware


def create_app(service: Gangplank, settings: ApiSettings | None = None, *, debug: bool = False) -> Litestar:
    """The HTTP API over one Gangplank service.

    `settings.tokens` empty: the API is open (see service.api.settings.resolve_bind_host).
    Bodies over `settings.max_body_size` bytes are 413 (Content-Length checked before reading,
    streamed bytes counted while reading)."""
    settings = settings or ApiSettings()
    return Litestar(
        route_handlers=route_handlers(),
        guards=[Authorizer(settings)],
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        middleware=[_timing_middleware, _without_empty_query_values],
        before_send=[_count_response],
        request_max_body_size=settings.max_body_size,
        state=_state(service),
        openapi_config=OpenAPIConfig(
            title=settings.title,
            version=API_VERSION,
            description="Event-sourced gang scheduler: see shared/spec/http.md and docs/http.md.",
            path="/schema",
            render_plugins=render_plugins(),
        ),
        debug=debug,
        logging_config=None,
    )


def _state(service: Gangplank) -> Any:
    from litestar.datastructures import State
    return State({STATE_KEY: service})
