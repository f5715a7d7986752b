"""The request core shared by Client and AsyncClient: what to send, when to retry, what came back.

A `Call` is one API request with its parser; both clients only move bytes (`httpx.Client.send` or
`await httpx.AsyncClient.send`) and sleep between attempts. A mutating call carries one
`Idempotency-Key` and one body for all its attempts, so a retry the server already applied is
answered with the first answer and recorded once (http.md, *Idempotency*).
"""
from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx

from gangplank_client.errors import ProblemError

T = TypeVar("T")
USER_AGENT = "gangplank-client/0.1"


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[Any], T]
    params: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    idempotency_key: str | None = None
    timeout: float | None = None  # extra seconds on top of the client's (a long poll's wait)


def call(method: str, path: str, parse: Callable[[Any], T], *, params: dict[str, Any] | None = None,
         body: Any = None, idempotency_key: str | None = None, timeout: float | None = None) -> Call[T]:
    """A Call; a mutating one gets its body serialised once and a key (the given one, or a new one)."""
    mutating = method in ("POST", "PUT", "DELETE", "PATCH")
    query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
    data = None if body is None else json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    key = (idempotency_key or str(uuid.uuid4())) if mutating else None
    return Call(method, path, parse, query, data, key, timeout)


def _param(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff (and jitter) for dropped connections, timeouts and 503."""
    attempts: int = 5  # in all, the first included
    backoff: float = 0.2  # seconds before the first retry, doubled after each
    max_backoff: float = 5.0
    # a connection refused (nothing listens) retried too; the commands turn it off to fail fast
    refused: bool = True

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        wait: float = min(self.max_backoff, self.backoff * 2 ** attempt) * (0.5 + random.random() / 2)
        if retry_after is not None:
            try:
                wait = max(wait, min(self.max_backoff, float(retry_after)))
            except ValueError:
                pass
        return wait


@dataclass
class Core:
    """Settings shared by both clients and the three steps of a request."""
    server: str
    cluster: str
    token: str | None = None
    timeout: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def request(self, http: httpx.Client | httpx.AsyncClient, c: Call[Any]) -> httpx.Request:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if c.idempotency_key is not None:
            headers["Idempotency-Key"] = c.idempotency_key
        if c.body is not None:
            headers["Content-Type"] = "application/json"
        timeout = httpx.Timeout(self.timeout + (c.timeout or 0.0))
        return http.build_request(c.method, self.server.rstrip("/") + c.path, params=c.params, content=c.body,
                                  headers=headers, timeout=timeout)

    def retry_after(self, attempt: int, response: httpx.Response | None, error: Exception | None) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None when this outcome is final."""
        if attempt + 1 >= self.retry.attempts:
            return None
        if error is not None:
            if isinstance(error, httpx.ConnectError) and not self.retry.refused:
                return None
            return self.retry.delay(attempt) if isinstance(error, httpx.TransportError) else None
        assert response is not None
        if response.status_code == 503:
            return self.retry.delay(attempt, response.headers.get("Retry-After"))
        return None

    @staticmethod
    def result(c: Call[T], response: httpx.Response) -> T:
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text
        if response.status_code >= 400:
            raise ProblemError.from_body(response.status_code, body, response.reason_phrase)
        return c.parse(body)
