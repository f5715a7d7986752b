"""What the HTTP app adds for replicas (docs/replicas.md): `GET /v1/replicas` always; the forwarding
middleware and the NotOwner handler when this process is a replica among others (PostgreSQL)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from litestar import Request, Response, get

from service.api import auth
from service.api.responses import json_response
from service.store.base import NotOwner

STARTED = time.time()


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class ReplicaParts:
    routes: list[Any]
    exception_handlers: dict[type[Exception], Any] = field(default_factory=dict)
    middleware: list[Any] = field(default_factory=list)


def replica_parts(ownership: Any, max_body: int) -> ReplicaParts:
    """`ownership`: the process's Ownership (service/ownership.py), None on SQLite and in memory."""
    routes = [get("/v1/replicas", operation_id="listReplicas", tags=["operations"],
                  summary="The replicas and the clusters each one owns",
                  opt={"access": auth.AUDIT})(list_replicas)]
    if ownership is None:
        return ReplicaParts(routes)
    from service.api.forwarding import forwarding_middleware, handle_not_owner

    return ReplicaParts(routes, {NotOwner: handle_not_owner}, [forwarding_middleware(ownership, max_body)])


OWNERSHIP_KEY = "gangplank.ownership"
IDENTITY_KEY = "gangplank.identity"


async def list_replicas(request: Request[Any, Any, Any]) -> Response[Any]:
    """Every replica answers the same `items`, read from the database; `self` is this one. One process
    on SQLite: it owns every cluster, each with epoch 1."""
    state = request.app.state
    ownership = state.get(OWNERSHIP_KEY)
    if ownership is not None:
        return json_response({"self": ownership.id, "items": await ownership.membership.directory()})
    replica, url = state.get(IDENTITY_KEY) or ("", "")
    from service.api.routes import service_of

    clusters = sorted(name for name, _ in await service_of(request).store.clusters())
    now = _stamp(time.time())
    return json_response({"self": replica, "items": [
        {"id": replica, "url": url, "live": True, "startedAt": _stamp(STARTED), "renewedAt": now,
         "clusters": [{"name": name, "epoch": 1} for name in clusters]}]})
