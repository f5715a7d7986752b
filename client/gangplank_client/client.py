"""`Client` and `AsyncClient`: the same methods, blocking or awaitable (shared/spec/client.md).

Each method is defined once, in `Calls` (what to send and how to read the answer); `_blocking` and
`_awaitable` turn it into a method of either client, and `Core` (in _http) decides retries for both.
"""
from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from gangplank_client import models as m
from gangplank_client._calls import Calls
from gangplank_client._http import Call, Core, RetryPolicy
from gangplank_client.builder import WorkloadBuilder
from gangplank_client.errors import ProblemError
from gangplank_client.keys import replaced, submission_key

P = ParamSpec("P")
T = TypeVar("T")
DEFAULT_SERVER = "http://127.0.0.1:8000"


def _blocking(build: Callable[Concatenate[Calls, P], Call[T]]) -> Callable[Concatenate[Client, P], T]:
    @functools.wraps(build)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.send(build(self.calls, *args, **kwargs))
    return method


def _awaitable(build: Callable[Concatenate[Calls, P], Call[T]]) -> Callable[Concatenate[AsyncClient, P],
                                                                             Awaitable[T]]:
    @functools.wraps(build)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.send(build(self.calls, *args, **kwargs))
    return method


Body = Mapping[str, Any] | m.WorkloadSpec | WorkloadBuilder


def _submission(target: str | WorkloadBuilder, body: Body | None) -> tuple[str, dict[str, Any]]:
    """(namespace, body) of `submit(namespace, body)` or `submit(builder)`: a builder's namespace is
    the one it was made with (default `default`), its body what build() gives (checked)."""
    if isinstance(target, WorkloadBuilder):
        if body is not None:
            raise TypeError("submit(builder) takes no body: the builder gives it")
        built = target.build()
        return str(built.pop("namespace", None) or "default"), built
    if isinstance(body, WorkloadBuilder):
        built = body.build()
        if built.pop("namespace", target) != target:
            raise ValueError(f"submit({target!r}, builder): the builder's namespace differs")
        return target, built
    if body is None:
        raise TypeError("submit(namespace, body): give the body (or submit(builder))")
    data = body.to_json() if isinstance(body, m.Model) else dict(body)
    if data.get("namespace") == target:  # as the path says: the same submission (and key) without it
        del data["namespace"]
    return target, data


def _workload_of(event: m.Event) -> tuple[str, str]:
    data = event.data
    return str(data.get("namespace") or ""), str(data.get("workload") or data.get("name") or "")


class _Feed:
    """The watch cursor: which page to ask for next, and each event once, in position order; with
    `workload` ("NS/NAME" or (NS, NAME)) only events about that workload, with `types` only those types
    (the cursor still moves past the others)."""

    def __init__(self, calls: Calls, after: int, wait: float, limit: int | None,
                 workload: str | tuple[str, str] | None = None, types: Collection[str] | None = None) -> None:
        self.calls, self.last, self.wait, self.limit = calls, after, wait, limit
        if isinstance(workload, str):
            namespace, sep, name = workload.partition("/")
            if not sep or not namespace or not name:
                raise ValueError(f"watch(workload={workload!r}): give NAMESPACE/NAME")
            workload = (namespace, name)
        self.workload = workload
        self.types = frozenset(types) if types is not None else None

    def wanted(self, event: m.Event) -> bool:
        return (self.types is None or event.type in self.types) and \
            (self.workload is None or _workload_of(event) == self.workload)

    def next_call(self) -> Call[m.EventPage]:
        return self.calls.events(after=self.last, limit=self.limit, wait=self.wait)

    def accept(self, page: m.EventPage) -> list[m.Event]:
        fresh = []
        for event in sorted(page.events, key=lambda e: e.position):
            if event.position > self.last:  # a page seen again after a reconnect yields nothing twice
                if self.wanted(event):
                    fresh.append(event)
                self.last = event.position
        return fresh


class _Base:
    def __init__(self, server: str, cluster: str, token: str | None, timeout: float, retry: RetryPolicy | None,
                 reconnect_delay: float) -> None:
        self.core = Core(server, cluster, token, timeout, retry or RetryPolicy())
        self.calls = Calls(cluster)
        self.reconnect_delay = reconnect_delay

    @property
    def cluster(self) -> str:
        return self.core.cluster

    def _key(self, namespace: str, body: dict[str, Any], current: m.WorkloadView | None, dry_run: bool) -> str:
        return submission_key(self.cluster, namespace, body, replaces=replaced(current), dry_run=dry_run)

    def _gave_up(self, error: Exception, failures: int, max_reconnects: int | None) -> bool:
        """watch() reconnects after a call that failed its retries, unless told to stop."""
        retriable = isinstance(error, httpx.TransportError) or (isinstance(error, ProblemError)
                                                                and error.status == 503)
        return not retriable or (max_reconnects is not None and failures > max_reconnects)


class Client(_Base):
    """A blocking client of one cluster. Use as a context manager, or call close()."""

    def __init__(self, server: str = DEFAULT_SERVER, cluster: str = "default", token: str | None = None, *,
                 timeout: float = 30.0, retry: RetryPolicy | None = None, reconnect_delay: float = 1.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(server, cluster, token, timeout, retry, reconnect_delay)
        self.http = httpx.Client(transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def send(self, c: Call[T]) -> T:
        """Send one call, retrying as the policy says, with the same key and body."""
        attempt = 0
        while True:
            try:
                response = self.http.send(self.core.request(self.http, c))
            except httpx.TransportError as exc:
                if (delay := self.core.retry_after(attempt, None, exc)) is None:
                    raise
            else:
                if (delay := self.core.retry_after(attempt, response, None)) is None:
                    return self.core.result(c, response)
            time.sleep(delay)
            attempt += 1

    def submit(self, namespace: str | WorkloadBuilder, body: Body | None = None, *,
               idempotency_key: str | None = None, dry_run: bool = False) -> m.WorkloadView:
        """Submit a workload (`submit(namespace, body)` or `submit(builder)`): its view with the
        decisions of this pass. Without a key, the key is derived from what is submitted (keys.py), as
        the `gangplank submit` command derives it: the same body again is a replay of the first answer,
        after a deletion a new incarnation of the name."""
        ns, data = _submission(namespace, body)
        if idempotency_key is None:
            idempotency_key = self._key(ns, data, self.current(ns, str(data.get("name", ""))), dry_run)
        return self.send(self.calls.submit(ns, data, idempotency_key=idempotency_key, dry_run=dry_run))

    def current(self, namespace: str, name: str) -> m.WorkloadView | None:
        """The name's latest incarnation, or None when it was never submitted."""
        try:
            return self.send(self.calls.get_workload(namespace, name))
        except ProblemError as exc:
            if exc.status == 404:
                return None
            raise

    def watch(self, after: int = 0, *, wait: float = 30.0, limit: int | None = None,
              max_reconnects: int | None = None, workload: str | tuple[str, str] | None = None,
              types: Collection[str] | None = None) -> Iterator[m.Event]:
        """The event feed after `after`, long-polled, each event once and in order, across reconnects
        (`max_reconnects` None: keep reconnecting while the server is away); only the events about
        `workload` ("NS/NAME") and of `types`, when given."""
        feed, failures = _Feed(self.calls, after, wait, limit, workload, types), 0
        while True:
            try:
                page = self.send(feed.next_call())
            except (httpx.TransportError, ProblemError) as exc:
                failures += 1
                if self._gave_up(exc, failures, max_reconnects):
                    raise
                time.sleep(self.reconnect_delay)
                continue
            failures = 0
            yield from feed.accept(page)

    put_node = _blocking(Calls.put_node)
    get_node = _blocking(Calls.get_node)
    list_nodes = _blocking(Calls.list_nodes)
    delete_node = _blocking(Calls.delete_node)
    put_device_class = _blocking(Calls.put_device_class)
    get_device_class = _blocking(Calls.get_device_class)
    list_device_classes = _blocking(Calls.list_device_classes)
    delete_device_class = _blocking(Calls.delete_device_class)
    put_resource_slice = _blocking(Calls.put_resource_slice)
    get_resource_slice = _blocking(Calls.get_resource_slice)
    list_resource_slices = _blocking(Calls.list_resource_slices)
    delete_resource_slice = _blocking(Calls.delete_resource_slice)
    put_priority_class = _blocking(Calls.put_priority_class)
    get_priority_class = _blocking(Calls.get_priority_class)
    list_priority_classes = _blocking(Calls.list_priority_classes)
    get_workload = _blocking(Calls.get_workload)
    delete_workload = _blocking(Calls.delete_workload)
    finish_pods = _blocking(Calls.finish_pods)
    scale = _blocking(Calls.scale)
    scale_pods = _blocking(Calls.scale_pods)
    create_pod_group = _blocking(Calls.create_pod_group)
    get_pod_group = _blocking(Calls.get_pod_group)
    delete_pod_group = _blocking(Calls.delete_pod_group)
    list_pod_groups = _blocking(Calls.list_pod_groups)
    list_workloads = _blocking(Calls.list_workloads)
    events = _blocking(Calls.events)
    history = _blocking(Calls.history)
    state = _blocking(Calls.state)
    verify = _blocking(Calls.verify)
    clusters = _blocking(Calls.clusters)


class AsyncClient(_Base):
    """The same methods as Client, awaitable. Use as an async context manager, or await aclose()."""

    def __init__(self, server: str = DEFAULT_SERVER, cluster: str = "default", token: str | None = None, *,
                 timeout: float = 30.0, retry: RetryPolicy | None = None, reconnect_delay: float = 1.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(server, cluster, token, timeout, retry, reconnect_delay)
        self.http = httpx.AsyncClient(transport=transport)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def send(self, c: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                response = await self.http.send(self.core.request(self.http, c))
            except httpx.TransportError as exc:
                if (delay := self.core.retry_after(attempt, None, exc)) is None:
                    raise
            else:
                if (delay := self.core.retry_after(attempt, response, None)) is None:
                    return self.core.result(c, response)
            await asyncio.sleep(delay)
            attempt += 1

    async def submit(self, namespace: str | WorkloadBuilder, body: Body | None = None, *,
                     idempotency_key: str | None = None, dry_run: bool = False) -> m.WorkloadView:
        """As Client.submit, awaitable."""
        ns, data = _submission(namespace, body)
        if idempotency_key is None:
            idempotency_key = self._key(ns, data, await self.current(ns, str(data.get("name", ""))), dry_run)
        return await self.send(self.calls.submit(ns, data, idempotency_key=idempotency_key, dry_run=dry_run))

    async def current(self, namespace: str, name: str) -> m.WorkloadView | None:
        try:
            return await self.send(self.calls.get_workload(namespace, name))
        except ProblemError as exc:
            if exc.status == 404:
                return None
            raise

    async def watch(self, after: int = 0, *, wait: float = 30.0, limit: int | None = None,
                    max_reconnects: int | None = None, workload: str | tuple[str, str] | None = None,
                    types: Collection[str] | None = None) -> AsyncIterator[m.Event]:
        feed, failures = _Feed(self.calls, after, wait, limit, workload, types), 0
        while True:
            try:
                page = await self.send(feed.next_call())
            except (httpx.TransportError, ProblemError) as exc:
                failures += 1
                if self._gave_up(exc, failures, max_reconnects):
                    raise
                await asyncio.sleep(self.reconnect_delay)
                continue
            failures = 0
            for event in feed.accept(page):
                yield event

    put_node = _awaitable(Calls.put_node)
    get_node = _awaitable(Calls.get_node)
    list_nodes = _awaitable(Calls.list_nodes)
    delete_node = _awaitable(Calls.delete_node)
    put_device_class = _awaitable(Calls.put_device_class)
    get_device_class = _awaitable(Calls.get_device_class)
    list_device_classes = _awaitable(Calls.list_device_classes)
    delete_device_class = _awaitable(Calls.delete_device_class)
    put_resource_slice = _awaitable(Calls.put_resource_slice)
    get_resource_slice = _awaitable(Calls.get_resource_slice)
    list_resource_slices = _awaitable(Calls.list_resource_slices)
    delete_resource_slice = _awaitable(Calls.delete_resource_slice)
    put_priority_class = _awaitable(Calls.put_priority_class)
    get_priority_class = _awaitable(Calls.get_priority_class)
    list_priority_classes = _awaitable(Calls.list_priority_classes)
    get_workload = _awaitable(Calls.get_workload)
    delete_workload = _awaitable(Calls.delete_workload)
    finish_pods = _awaitable(Calls.finish_pods)
    scale = _awaitable(Calls.scale)
    scale_pods = _awaitable(Calls.scale_pods)
    create_pod_group = _awaitable(Calls.create_pod_group)
    get_pod_group = _awaitable(Calls.get_pod_group)
    delete_pod_group = _awaitable(Calls.delete_pod_group)
    list_pod_groups = _awaitable(Calls.list_pod_groups)
    list_workloads = _awaitable(Calls.list_workloads)
    events = _awaitable(Calls.events)
    history = _awaitable(Calls.history)
    state = _awaitable(Calls.state)
    verify = _awaitable(Calls.verify)
    clusters = _awaitable(Calls.clusters)


