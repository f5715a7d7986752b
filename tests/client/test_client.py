"""Client and AsyncClient against a real server: typed views, problems, idempotent retries, watch."""
from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from gangplank_client import AsyncClient, Client, ProblemError, RetryPolicy, WorkloadBuilder
from gangplank_client.models import NodeView, WorkloadView

FAST = RetryPolicy(attempts=4, backoff=0.01, max_backoff=0.02)


def gang(name: str, pods: int = 2, cpu: str = "2") -> dict:
    return WorkloadBuilder(name).gang("workers", min_count=pods).pods("w", count=pods, requests={"cpu": cpu}).build()


def test_typed_views_round_trip(server, cluster):
    with Client(server, cluster=cluster) as c:
        node = c.put_node("n1", allocatable={"cpu": "8", "memory": "16Gi"}, labels={"example.com/rack": "r1"})
        assert isinstance(node, NodeView) and node.allocatable == {"cpu": "8", "memory": "16Gi"}
        assert node.decisions == []
        assert c.put_priority_class("high", value=1000).value == 1000
        v = c.submit("team-a", gang("train"))
        assert isinstance(v, WorkloadView) and v.status.phase == "Scheduled"
        g = v.status.pod_groups[0]
        assert (g.name, g.min_count, g.placed_pods) == ("workers", 2, 2)
        assert [p.node for p in g.pods] == ["n1", "n1"]
        assert [d.type for d in v.decisions or []] == ["PodGroupScheduled"]
        assert v.spec.pod_groups and v.spec.pod_groups[0].pods[0].requests == {"cpu": "2"}
        assert c.get_workload("team-a", "train").position == v.position
        assert [w.name for w in c.list_workloads(namespace="team-a").items] == ["train"]
        assert c.get_node("n1").pods[0].pod_group == "workers"
        assert [n.name for n in c.list_nodes()] == ["n1"]
        history = c.history("team-a", "train")
        assert [e.type for e in history.events] == ["WorkloadSubmitted", "PodGroupScheduled"]
        assert c.state().workloads[0].name == "train"
        assert c.state(at=1).workloads == []
        verified = c.verify()
        assert verified.ok and verified.events == 4 and len(verified.head) == 64
        assert cluster in {ci.name for ci in c.clusters()}
        removed = c.delete_node("n1")
        assert {(p.pod, p.node) for p in removed.released} == {("w-0", "n1"), ("w-1", "n1")}
        final = c.delete_workload("team-a", "train")
        assert final.status.phase == "Finished"


def test_problems_name_status_title_and_fields(server, cluster):
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
        with pytest.raises(ProblemError) as bad:
            c.submit("team-a", {"name": "x", "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 3}},
                                                            "pods": [{"name": "p", "count": 2}]}]})
        assert bad.value.status == 422 and bad.value.title
        assert ("body", "podGroups", 0, "schedulingPolicy", "gang", "minCount") in [e.loc for e in bad.value.errors]
        c.submit("team-a", gang("taken"))
        with pytest.raises(ProblemError) as conflict:  # another body under a live name (the same one is a replay)
            c.submit("team-a", gang("taken", pods=1))
        assert conflict.value.status == 409 and conflict.value.errors == []
        with pytest.raises(ProblemError) as missing:
            c.get_workload("team-a", "nope")
        assert missing.value.status == 404 and "nope" in missing.value.detail


def test_dry_run_records_nothing(server, cluster):
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
        v = c.submit("team-a", gang("maybe"), dry_run=True)
        assert v.dry_run is True and v.status.phase == "Scheduled"
        assert c.list_workloads().items == []


class Flaky(httpx.BaseTransport):
    """Forwards to the real server, then drops the answer of the first `drops` requests: the server has
    applied them, the client never hears back."""

    def __init__(self, drops: int = 1, status: int | None = None) -> None:
        self.real, self.drops, self.status, self.seen = httpx.HTTPTransport(), drops, status, []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append((request.method, request.headers.get("idempotency-key"), request.read()))
        if self.drops and self.status is not None:
            self.drops -= 1
            return httpx.Response(self.status, headers={"Retry-After": "0"},
                                  json={"title": "Service Unavailable", "status": self.status})
        response = self.real.handle_request(request)
        response.read()
        if self.drops:
            self.drops -= 1
            raise httpx.ReadError("connection dropped", request=request)
        return response


def test_a_dropped_answer_is_retried_with_the_same_key_and_applied_once(server, cluster):
    flaky = Flaky(drops=2)
    with Client(server, cluster=cluster, retry=FAST, transport=flaky) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
        flaky.seen.clear()
        flaky.drops = 2
        v = c.submit("team-a", gang("once"), idempotency_key=f"{cluster}-once")
    assert v.status.phase == "Scheduled"
    assert len(flaky.seen) == 3 and len({(m, k, b) for m, k, b in flaky.seen}) == 1  # same key, same bytes
    with Client(server, cluster=cluster) as c:
        submitted = [e for e in c.events(after=0, limit=1000).events if e.type == "WorkloadSubmitted"]
    assert len(submitted) == 1


def test_503_is_retried_then_bounded(server, cluster):
    flaky = Flaky(drops=1, status=503)
    with Client(server, cluster=cluster, retry=FAST, transport=flaky) as c:
        assert c.put_node("n1", allocatable={"cpu": "1"}).name == "n1"
        assert len(flaky.seen) == 2 and flaky.seen[0] == flaky.seen[1]
        flaky.drops, flaky.seen = 10, []
        with pytest.raises(ProblemError) as exc:
            c.put_node("n2", allocatable={"cpu": "1"})
        assert exc.value.status == 503 and len(flaky.seen) == FAST.attempts


def test_a_refused_connection_gives_up_after_the_attempts():
    calls = []

    def refuse(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise httpx.ConnectError("refused", request=request)

    with Client("http://127.0.0.1:9", retry=FAST, transport=httpx.MockTransport(refuse)) as c:
        with pytest.raises(httpx.ConnectError):
            c.submit("team-a", gang("x"), idempotency_key="k")
        assert len(calls) == FAST.attempts and len({r.headers["idempotency-key"] for r in calls}) == 1
        with pytest.raises(httpx.ConnectError):  # a derived key needs the name's latest incarnation first
            c.submit("team-a", gang("x"))
        assert len(calls) == 2 * FAST.attempts and calls[-1].method == "GET"
        with pytest.raises(httpx.ConnectError):
            c.get_workload("team-a", "x")  # reads are retried too, and carry no key
        assert "idempotency-key" not in calls[-1].headers


def test_every_mutating_call_carries_a_key_and_reads_none():
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(500, json={"title": "boom", "status": 500})

    with Client("http://x", cluster="c", token="t0k", transport=httpx.MockTransport(record)) as c:
        for call in (lambda: c.put_node("n", allocatable={}), lambda: c.delete_node("n"),
                     lambda: c.put_device_class("d", {}), lambda: c.delete_device_class("d"),
                     lambda: c.put_resource_slice("s", {"driver": "d", "pool": {}}),
                     lambda: c.delete_resource_slice("s"), lambda: c.put_priority_class("p", value=1),
                     lambda: c.submit("ns", {"name": "w"}, idempotency_key="given"), lambda: c.delete_workload("ns", "w"),
                     lambda: c.submit("ns", {"name": "w"}, idempotency_key="mine"), lambda: c.verify()):
            with pytest.raises(ProblemError):
                call()
    mutating = [r for r in seen if r.method != "GET"]
    assert len(mutating) == 10 and all(r.headers.get("idempotency-key") for r in mutating)
    assert len({r.headers["idempotency-key"] for r in mutating}) == 10 and mutating[-1].headers["idempotency-key"] == "mine"
    assert "idempotency-key" not in seen[-1].headers
    assert all(r.headers["authorization"] == "Bearer t0k" for r in seen)
    assert json.loads(mutating[0].content) == {"allocatable": {}, "labels": {}}


def test_watch_yields_each_event_once_in_order_across_reconnects(server, cluster):
    pages = 0

    class Repeating(httpx.BaseTransport):
        """Every other page is lost in transit; a lost one's events come again on the next poll."""
        real = httpx.HTTPTransport()

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            nonlocal pages
            pages += 1
            response = self.real.handle_request(request)
            response.read()
            if pages % 2 == 0:
                raise httpx.RemoteProtocolError("peer closed", request=request)
            return response

    with Client(server, cluster=cluster) as c:
        for i in range(5):
            c.put_node(f"n{i}", allocatable={"cpu": "1"})
    with Client(server, cluster=cluster, retry=FAST, transport=Repeating(), reconnect_delay=0) as c:
        seen = []
        for event in c.watch(after=1, limit=2, wait=0.2):
            seen.append(event.position)
            if len(seen) == 4:
                break
    assert seen == [2, 3, 4, 5]


def test_watch_waits_for_new_events(server, cluster):
    with Client(server, cluster=cluster) as writer, Client(server, cluster=cluster) as reader:
        events = reader.watch(after=0, wait=5)
        writer.put_node("n1", allocatable={"cpu": "1"})
        assert next(events).type == "NodeUpserted"


async def test_async_client_has_the_same_methods(server, cluster):
    missing = [n for n in dir(Client) if not n.startswith("_") and n not in ("close",) and not hasattr(AsyncClient, n)]
    assert missing == []
    async with AsyncClient(server, cluster=cluster) as c:
        await c.put_node("n1", allocatable={"cpu": "8"})
        v = await c.submit("team-a", gang("async"))
        assert v.status.pod_groups[0].placed_pods == 2
        assert (await c.submit("team-a", gang("async"))).position == v.position  # a replay (derived key)
        with pytest.raises(ProblemError) as exc:
            await c.submit("team-a", gang("async", pods=1))
        assert exc.value.status == 409
        got = []
        async for event in c.watch(after=0, wait=0.1):
            got.append(event.type)
            if len(got) == 3:
                break
        assert got == ["NodeUpserted", "WorkloadSubmitted", "PodGroupScheduled"]
        page = await asyncio.wait_for(c.events(after=3, wait=0.2), 5)
        assert page.events == [] and page.last_position == 3


def test_submit_derives_its_key_as_the_commands_do(server, cluster):
    """Without a key, submit is idempotent (client.md): the same body twice is one workload; after
    its deletion the same body is a new incarnation of the name (lifecycle.md); a builder's namespace
    is not given again."""
    from gangplank_client.keys import submission_key

    seen: list[httpx.Request] = []

    class Recording(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return super().handle_request(request)

    builder = WorkloadBuilder("train", namespace="team-a").gang("workers", min_count=1).pods("w", requests={"cpu": "1"})
    with Client(server, cluster=cluster, transport=Recording()) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
        first = c.submit(builder)
        assert (first.namespace, first.name, first.previous) == ("team-a", "train", None)
        again = c.submit("team-a", builder.build() | {})  # the same body: a replay, the first answer
        assert again.position == first.position
        keys = [r.headers["idempotency-key"] for r in seen if r.method == "POST"]
        body = {k: v for k, v in builder.build().items() if k != "namespace"}
        assert keys[-2:] == [submission_key(cluster, "team-a", body)] * 2
        c.delete_workload("team-a", "train")
        rerun = c.submit(builder)
        assert rerun.previous == first.position and rerun.status.phase == "Scheduled"
        assert c.submit(builder).position == rerun.position
        assert [r.headers["idempotency-key"] for r in seen if r.method == "POST"][-1] == \
            submission_key(cluster, "team-a", body, replaces=first.position)
        assert [v.position for v in c.list_workloads().items] == [first.position, rerun.position]
        with pytest.raises(ValueError):
            c.submit("team-b", builder)  # the builder says team-a


def test_watch_filters_by_workload_and_type(server, cluster):
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "8"})
        a = c.submit("team-a", gang("a", cpu="1"))
        c.submit("team-a", gang("b", cpu="1"))
        c.delete_workload("team-a", "a")
        last = c.events(after=0, limit=1).last_position
        mine = []
        for event in c.watch(after=0, wait=0.1, workload="team-a/a"):
            mine.append(event)
            if event.type == "WorkloadDeleted":
                break
        assert [e.type for e in mine] == ["WorkloadSubmitted", "PodGroupScheduled", "WorkloadDeleted"]
        assert mine[0].position == a.position
        placed = []
        for event in c.watch(after=0, wait=0.1, types={"PodGroupScheduled"}):
            placed.append(event.data["workload"])
            if len(placed) == 2:
                break
        assert placed == ["a", "b"] and last >= mine[-1].position
        with pytest.raises(ValueError):
            next(iter(c.watch(workload="no-slash")))
