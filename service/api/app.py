"""The Litestar application of http.md."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_plus

from litestar import Litestar
from litestar.connection import ASGIConnection
from litestar.enums import ScopeType
from litestar.exceptions import NotFoundException, ValidationException
from litestar.openapi import OpenAPIConfig
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from service.api.auth import Authorizer
from service.api.console import console_handlers
from service.api.metrics import HTTP_REQUEST_DURATION, UNMATCHED_ROUTE
from service.api.openapi import render_plugins
from service.api.podgroup_routes import podgroup_router
from service.api.replicas_routes import IDENTITY_KEY, OWNERSHIP_KEY, replica_parts
from service.api.responses import AUTHORIZER_KEY, COUNTED, EXCEPTION_HANDLERS
from service.api.routes import STATE_KEY, route_handlers
from service.api.series import series_handlers
from service.api.settings import ApiSettings
from service.app.service import Gangplank
from service.metrics import REQUESTS
from service.ownership import Ownership
from service.replica import REPLICA_HEADER

API_VERSION = "1"

_SCHEMA_NOT_FOUND: Any
try:  # the handler Litestar routes unknown /schema/... paths to (it answers an HTML page)
    from litestar._openapi.plugin import handle_schema_path_not_found as _SCHEMA_NOT_FOUND
except ImportError:  # pragma: no cover - another Litestar layout: its own answer stands
    _SCHEMA_NOT_FOUND = None


def _route_middleware(authorizer: Authorizer) -> Callable[[ASGIApp], ASGIApp]:
    """One layer for what every routed HTTP request needs (each ASGI layer costs per request):
    - access (auth.Authorizer), checked here rather than as a Litestar guard, which copies the
      route handler on every request; a refusal (401/403) is answered by the exception handlers;
    - `?limit=&phase=` is as if the parameters were not given (Kubernetes reads an empty `?limit=` or
      `?labelSelector=` so; http.md writes the list as `/workloads?namespace=&phase=&limit=&after=`);
    - every routed answer is counted by route template and status, and timed (answers given before
      any route, such as 404s of unknown paths, are counted by the exception handlers: see COUNTED)."""
    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:
                await app(scope, receive, send)
                return
            if not authorizer.open:
                await authorizer(ASGIConnection(scope, receive, send), scope["route_handler"])
            if _SCHEMA_NOT_FOUND is not None and getattr(scope["route_handler"], "fn", None) is _SCHEMA_NOT_FOUND:
                raise NotFoundException()  # answered as problem details, not Litestar's HTML page
            query = scope.get("query_string") or b""
            if query:
                pairs = query.split(b"&")
                kept = [p for p in pairs if p.partition(b"=")[2]]
                if len(kept) != len(pairs):
                    scope["query_string"] = b"&".join(kept)
                if len(kept) > 1:
                    _refuse_repeated(kept)
            status = 0
            scope[COUNTED] = True  # type: ignore[literal-required]  # Litestar types the scope as closed

            async def counting_send(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            started = time.perf_counter()
            try:
                await app(scope, receive, counting_send)
            finally:
                method, route = scope.get("method", ""), scope.get("path_template") or UNMATCHED_ROUTE
                HTTP_REQUEST_DURATION.labels(method, route).observe(time.perf_counter() - started)
                if status:
                    REQUESTS.labels(method, route, str(status)).inc()
        return middleware
    return wrap


def _replica_header(replica: str) -> Callable[[Message, Scope], Any]:
    """replicas.md: every answer carries `Gangplank-Replica: <id>`, the replica whose code produced it
    (also answers given before any route, such as 404s of unknown paths)."""
    header = (REPLICA_HEADER.encode("latin-1"), replica.encode("latin-1"))

    async def before_send(message: Message, scope: Scope) -> None:
        if message["type"] == "http.response.start":
            headers = message.get("headers", ())
            if not any(k == header[0] for k, _ in headers):  # a forwarded answer keeps the owner's
                message["headers"] = [*headers, header]

    return before_send


def _refuse_repeated(pairs: list[bytes]) -> None:
    """A query parameter given twice is a 422: which value counts would be a guess (and the
    access check and the handler must read the same one)."""
    names = [unquote_plus(p.partition(b"=")[0].decode("latin-1")) for p in pairs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValidationException(detail="a query parameter is given more than once", extra=[
            {"key": n, "source": "query", "message": "given more than once"} for n in repeated])


def create_app(service: Gangplank, settings: ApiSettings | None = None, *, debug: bool = False,
               ownership: Ownership | None = None) -> Litestar:
    """The HTTP API over one Gangplank service.

    `settings.tokens` empty: the API is open (see service.api.settings.resolve_bind_host).
    Bodies over `settings.max_body_size` bytes are 413 (Content-Length checked before reading,
    streamed bytes counted while reading)."""
    settings = settings or ApiSettings()
    authorizer = Authorizer(settings)
    replicas = replica_parts(ownership, settings.max_body_size)  # docs/replicas.md (forwarding.py)
    return Litestar(
        route_handlers=[*route_handlers(), podgroup_router(), *series_handlers(), *console_handlers(), *replicas.routes],
        exception_handlers=EXCEPTION_HANDLERS | replicas.exception_handlers,
        middleware=[_route_middleware(authorizer), *replicas.middleware],
        before_send=[_replica_header(settings.replica_id)] if settings.replica_id else [],
        request_max_body_size=settings.max_body_size,
        state=_state(service, authorizer, {OWNERSHIP_KEY: ownership,
                                            IDENTITY_KEY: (settings.replica_id, settings.advertise_url)}),
        openapi_config=OpenAPIConfig(
            title=settings.title,
            version=API_VERSION,
            description="Event-sourced gang scheduler: see docs/http.md in the repository.",
            path="/schema",
            render_plugins=render_plugins(),
        ),
        debug=debug,
        logging_config=None,
    )


def _state(service: Gangplank, authorizer: Authorizer, extra: dict[str, Any]) -> Any:
    from litestar.datastructures import State
    return State({STATE_KEY: service, AUTHORIZER_KEY: authorizer, **extra})
