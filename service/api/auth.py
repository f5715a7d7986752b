"""Access control (http.md, *Access*): bearer tokens mapped to roles.

Each route handler declares what it needs in `opt["access"]`:

| access | admin | auditor | submitter |
|---|---|---|---|
| inventory:write | yes | – | – |
| inventory:read, clusters | yes | yes | yes |
| workloads:write | yes | – | its namespaces (path) |
| workloads:read | yes | yes | its namespaces (path) |
| workloads:list | yes | yes | `?namespace=` one of its namespaces |
| audit | yes | yes | – |
| public (health, metrics, OpenAPI) | anyone, no token needed |

The `replica` role (docs/replicas.md) is refused (403) everywhere but the internal routes, which only it may use.

The check runs in the app's route middleware: after routing (404/405 first), before the body is read,
so a request without a valid token (401) or with one whose role does not cover it (403)
never reaches the service and records nothing.
"""
from __future__ import annotations

import hashlib
from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from service.api.settings import ANONYMOUS, ApiSettings, Principal

PRINCIPAL_KEY = "gangplank_principal"
WWW_AUTHENTICATE = {"WWW-Authenticate": 'Bearer realm="gangplank"'}

INVENTORY_WRITE = "inventory:write"
INVENTORY_READ = "inventory:read"
CLUSTERS = "clusters"
WORKLOADS_WRITE = "workloads:write"
WORKLOADS_READ = "workloads:read"
WORKLOADS_LIST = "workloads:list"
AUDIT = "audit"
PUBLIC = "public"
INTERNAL = "internal"  # the routes between replicas (docs/replicas.md): the replica role only

_AUDITOR = {INVENTORY_READ, CLUSTERS, WORKLOADS_READ, WORKLOADS_LIST, AUDIT}
_SUBMITTER = {INVENTORY_READ, CLUSTERS}


def principal_of(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    principal: Principal = connection.scope.get("state", {}).get(PRINCIPAL_KEY, ANONYMOUS)
    return principal


def _bearer(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    values = connection.headers.getall("authorization", [])
    if len(values) != 1:
        return None
    scheme, _, token = values[0].strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


class Authorizer:
    """The access check; one per app (it holds the token digests of the app's settings)."""

    def __init__(self, settings: ApiSettings):
        self.open = settings.is_open
        self._principals = settings.principals()

    def _principal(self, token: str | None) -> Principal | None:
        """The holder of a valid token, or None."""
        principal = self._principals.get(hashlib.sha256(token.encode("utf-8")).hexdigest()) if token else None
        return principal if principal is not None and principal.grant is not None else None

    def authenticated(self, connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
        """Open, or a valid token: for answers given before any route (an unknown path or method
        is a 401 to whoever has no valid token, as Kubernetes' API server answers)."""
        return self.open or self._principal(_bearer(connection)) is not None

    async def __call__(self, connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
        # async: Litestar runs a sync guard in a worker thread (about 0.5 ms per request)
        access = handler.opt.get("access")
        if access is None or access == PUBLIC or self.open:
            return
        token = _bearer(connection)
        principal = self._principal(token)
        if principal is None:
            detail = "a valid bearer token is required" if token is None else "the bearer token is not valid"
            raise NotAuthorizedException(detail=detail, headers=WWW_AUTHENTICATE)
        connection.scope.setdefault("state", {})[PRINCIPAL_KEY] = principal
        grant = principal.grant
        assert grant is not None  # a token's principal has its grant (only the open API's anonymous has none)
        if grant.role == "replica" or access == INTERNAL:
            if grant.role == "replica" and access == INTERNAL:
                return
            raise PermissionDeniedException(detail="the replica role is only for the routes between replicas"
                                            if grant.role == "replica" else "only the replica role may use this")
        if grant.role == "admin":
            return
        if grant.role == "auditor":
            if access in _AUDITOR:
                return
            raise PermissionDeniedException(detail=f"the auditor role may only read (this needs {access})")
        # submitter
        if access in _SUBMITTER:
            return
        if access in (WORKLOADS_WRITE, WORKLOADS_READ):
            namespace = connection.path_params.get("namespace")
            if grant.covers_namespace(namespace):
                return
            raise PermissionDeniedException(detail=f"this token may not act on namespace {namespace!r}")
        if access == WORKLOADS_LIST:
            namespaces = connection.query_params.getall("namespace", [])
            if namespaces and all(grant.covers_namespace(n) for n in namespaces):
                return
            raise PermissionDeniedException(
                detail="a submitter lists workloads of one of its namespaces: add ?namespace=<one of them>")
        raise PermissionDeniedException(detail=f"the submitter role does not cover this ({access})")
