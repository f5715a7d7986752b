"""Forwarding between replicas (docs/replicas.md, *Forwarding*): a request under
/v1/clusters/{cluster}/ that this replica does not own goes to the owner's advertised URL, and the
client gets the owner's status, body bytes and headers.

A route middleware, after the access check: the store-only reads (the event feed and verify) and a
cluster name that fails validation are answered here; everything else goes where `Ownership.route`
says. A request decided here whose turn finds the cluster gone (NotOwner: fenced, handed over, lease
run out) is answered by the exception handler with an internal marker that this middleware swallows,
and the request goes to the current owner as if it had just arrived.
"""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import structlog
from litestar import Request, Response

from service import metrics
from service.api.peer_client import Answer, Lost, PeerClient, Refused
from service.ownership import Ownership
from service.replica import REPLICA_HEADER
from service.schemas.names import cluster_name_error
from service.schemas.problems import PROBLEM_BASE, PROBLEM_CONTENT_TYPE, SERVICE_UNAVAILABLE, problem
from service.store.base import NotOwner, StoreUnavailable
from service.store.membership import Owner

log = structlog.get_logger("gangplank.api")
# raw ASGI: Litestar's typed dicts do not fit a middleware that builds its own messages
ASGIApp = Any
Scope = Any
Receive = Any
Send = Any
Message = Any

FORWARDED_BY = "gangplank-forwarded-by"
MISDIRECTED = PROBLEM_BASE + "misdirected-request"
REROUTE = b"x-gangplank-reroute"  # internal: the NotOwner marker, never sent to a client
_PREFIX = "/v1/clusters/{cluster:str}"
# a workload's history reads the cluster's state (which positions are the workload's): the owner answers it
STORE_ONLY = {_PREFIX + "/events", _PREFIX + "/audit/verify"}
SENT = ("authorization", "content-type", "accept", "idempotency-key")
KEPT = (b"content-type", b"location", b"idempotent-replayed", b"retry-after", REPLICA_HEADER.encode())
UNREACHABLE_SECONDS = 2.0  # a live owner not reached within this: 503
WATCH_SECONDS = 0.25  # while a forwarded request waits, the owner's liveness is checked this often
_FORWARDED_HTTP = metrics.FORWARDED.labels(kind="http")


def handle_not_owner(request: Request[Any, Any, Any], exc: NotOwner) -> Response[Any]:
    """NotOwner reached the answer: the forwarding middleware swallows this and sends the request on."""
    return Response(content=b"", status_code=421, headers={REROUTE.decode(): "1"})


class _Lost(Exception):
    """The owner failed while the request waited: connection lost, or its lease ran out."""


def forwarding_middleware(ownership: Ownership, max_body: int) -> Callable[[ASGIApp], ASGIApp]:
    forwarder = Forwarder(ownership)

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            cluster = (scope.get("path_params") or {}).get("cluster") if scope["type"] == "http" else None
            if cluster is None or scope.get("path_template") in STORE_ONLY or cluster_name_error(cluster):
                await app(scope, receive, send)
                return
            body = await _body(receive, max_body)
            if body is None:  # too large: answered here (413)
                await app(scope, _replay(b"", more=True, receive=receive), send)
                return
            await forwarder.dispatch(app, scope, cluster, body, send)
        return middleware
    return wrap


async def _body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, more: bool = False, receive: Receive | None = None) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        if receive is not None:
            return await receive()
        await asyncio.Event().wait()  # as a client that sent everything: wait for the disconnect
        raise AssertionError("unreachable")
    return replay


def _problem(status: int, detail: str, type_: str, retry: bool) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    headers = [(b"content-type", PROBLEM_CONTENT_TYPE.encode())]
    if retry:
        headers.append((b"retry-after", b"1"))
    return status, headers, json.dumps(problem(status, detail, type=type_)).encode()


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    """The whole answer, with its Content-Length (as the owner sent it: not chunked)."""
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Forwarder:
    def __init__(self, ownership: Ownership) -> None:
        self.ownership = ownership
        self.client = PeerClient()

    async def dispatch(self, app: ASGIApp, scope: Scope, cluster: str, body: bytes, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        method = scope["method"]
        read = method == "GET"
        safe = read or "idempotency-key" in headers
        again, started = False, time.monotonic()
        for _ in range(20):
            try:
                owner = await self.ownership.route(cluster, read=read, again=again)
            except StoreUnavailable as exc:
                await _answer(send, *_problem(503, f"cluster {cluster!r}: its owner cannot be found ({exc})",
                                              SERVICE_UNAVAILABLE, True))
                return
            if owner is None:
                if await self._here(app, scope, body, send):
                    return
                again = True
                continue
            if FORWARDED_BY in headers:  # never forwarded twice
                await _answer(send, *_problem(421, f"cluster {cluster!r} is owned by replica {owner.replica}, "
                                              f"not {self.ownership.id}", MISDIRECTED, False))
                return
            try:
                answer = await self._forward(owner, cluster, method, scope, headers, body)
            except Refused:  # never delivered: retry safely, while the owner is live within 2 s
                if time.monotonic() - started > UNREACHABLE_SECONDS:
                    await _answer(send, *_problem(503, f"cluster {cluster!r}: its owner {owner.replica} cannot be "
                                                  "reached", SERVICE_UNAVAILABLE, True))
                    return
                await asyncio.sleep(0.05)
                again = True
                continue
            except (_Lost, Lost):
                if not safe:
                    await _answer(send, *_problem(503, f"cluster {cluster!r}: its owner {owner.replica} failed "
                                                  "while deciding this request; its outcome is unknown",
                                                  SERVICE_UNAVAILABLE, True))
                    return
                again = True
                continue
            if answer.status == 421 and answer.header(b"content-type") == PROBLEM_CONTENT_TYPE.encode():
                again = True  # the owner changed meanwhile: look it up again
                continue
            await _answer(send, answer.status, [(k, v) for k, v in answer.headers if k in KEPT], answer.body)
            return
        await _answer(send, *_problem(503, f"cluster {cluster!r}: its owner kept changing", SERVICE_UNAVAILABLE, True))

    async def _here(self, app: ASGIApp, scope: Scope, body: bytes, send: Send) -> bool:
        """Decide or answer here; False when the turn found the cluster gone (NotOwner)."""
        rerouted = False

        async def marked(message: Message) -> None:
            nonlocal rerouted
            if message["type"] == "http.response.start" and any(k == REROUTE for k, _ in message["headers"]):
                rerouted = True
            if not rerouted:
                await send(message)

        await app(scope, _replay(body), marked)
        return not rerouted

    async def _forward(self, owner: Owner, cluster: str, method: str, scope: Scope, headers: dict[str, str],
                       body: bytes) -> Answer:
        """Send the request to the owner; _Lost when the owner stops being live while it waits."""
        assert owner.url is not None
        sent = [(k, headers[k]) for k in SENT if k in headers] + [(FORWARDED_BY, self.ownership.id)]
        query = scope.get("query_string", b"").decode("latin-1")
        target = scope["raw_path"].decode("latin-1") + (f"?{query}" if query else "")
        _FORWARDED_HTTP.inc()
        request = asyncio.ensure_future(self.client.request(owner.url, method, target, sent, body))
        try:
            while True:
                done, _ = await asyncio.wait({request}, timeout=WATCH_SECONDS)
                if done:
                    return request.result()
                if not await self.ownership.owner_live(cluster, owner):
                    raise _Lost()
        finally:
            if not request.done():
                request.cancel()

    async def close(self) -> None:
        await self.client.close()
