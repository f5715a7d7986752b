"""Events feed, long poll, clusters, chain verification and tampering, operations."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from litestar.testing import TestClient

from service.store.base import GENESIS_HASH, chain_hash
from tests.e2e.helpers import Api, node, run_sql, workload


def test_events_paging(client: TestClient, cluster: str) -> None:
    api = Api(client, cluster)
    assert api.get("/events").json() == {"events": [], "lastPosition": 0}
    api.put_node("n1", node(cpu="4"))
    for i in range(4):
        api.submit(workload(f"w{i}", 1, cpu="1"), headers={"Idempotency-Key": f"{cluster}-{i}"})
    last = api.last_position()
    assert last == 1 + 4 * 2

    events = api.all_events()
    assert [e["position"] for e in events] == list(range(1, last + 1))
    prev = GENESIS_HASH
    for e in events:  # the envelope of events.md, chained
        assert set(e) == {"cluster", "position", "type", "schemaVersion", "data", "metadata", "recordedAt",
                          "prevHash", "hash"}
        assert e["cluster"] == cluster and e["prevHash"] == prev
        assert e["hash"] == chain_hash(prev, {k: v for k, v in e.items() if k not in ("hash", "prevHash")})
        prev = e["hash"]
    first = events[1]
    assert first["type"] == "WorkloadSubmitted"
    assert first["metadata"]["source"] == "http" and first["metadata"]["commandId"] == f"{cluster}-0"
    assert first["metadata"]["causationPosition"] is None
    assert events[2]["metadata"]["causationPosition"] == 2

    page = api.get("/events", params={"after": 2, "limit": 3}).json()
    assert [e["position"] for e in page["events"]] == [3, 4, 5] and page["lastPosition"] == last
    assert api.get("/events", params={"after": last}).json() == {"events": [], "lastPosition": last}
    assert api.get("/events", params={"after": last + 100}).json()["events"] == []
    assert len(api.get("/events", params={"limit": 1000}).json()["events"]) == last

    # the cluster list
    items = client.get("/v1/clusters").json()["items"]
    assert {"name": cluster, "lastPosition": last} in items
    assert [c["name"] for c in items] == sorted(c["name"] for c in items)


def test_long_poll(client: TestClient, cluster: str) -> None:
    api = Api(client, cluster)
    api.put_node("n1", node(cpu="4"))
    last = api.last_position()

    def poll(wait: float) -> tuple[dict, float]:
        t0 = time.monotonic()
        r = api.get("/events", params={"after": last, "wait": wait})
        assert r.status_code == 200, r.text
        return r.json(), time.monotonic() - t0

    # nothing arrives: empty after the timeout
    body, took = poll(1)
    assert body == {"events": [], "lastPosition": last}
    assert 0.95 <= took < 3, took

    # an event from a concurrent request ends the wait early
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(poll, 1)
        time.sleep(0.2)
        t0 = time.monotonic()
        assert api.submit(workload("wake", 1, cpu="1")).status_code == 201
        body, took = waiting.result()
    assert [e["type"] for e in body["events"]][:1] == ["WorkloadSubmitted"]
    assert body["events"][0]["position"] == last + 1
    assert took < 0.9, f"long poll took {took:.2f}s (the POST took {time.monotonic() - t0:.2f}s)"


def test_verify_and_tampering(client: TestClient, pg_url: str, cluster: str) -> None:
    api = Api(client, cluster)
    api.put_node("n1", node(cpu="4"))
    for i in range(3):
        api.submit(workload(f"w{i}", 1, cpu="1"))
    last = api.last_position()
    ok = api.verify()
    events = api.all_events()
    assert ok == {"ok": True, "events": last, "head": events[-1]["hash"]}

    # change one stored row's data (cpu "1" -> "2" in w1's submission), by raw SQL
    target = next(e for e in events if e["type"] == "WorkloadSubmitted" and e["data"]["name"] == "w1")
    status = run_sql(pg_url, "UPDATE events SET data = replace(data, '\"cpu\":\"1\"', '\"cpu\":\"2\"') "
                                     "WHERE cluster = $1 AND position = $2", cluster, target["position"])
    assert status == "UPDATE 1"
    broken = api.verify()
    assert broken["ok"] is False
    assert broken["firstBadPosition"] == target["position"]
    assert broken["events"] == target["position"] - 1
    assert broken["head"] == events[target["position"] - 2]["hash"]
    # other clusters are not affected
    other = Api(client, cluster + "-x")
    other.put_node("n1")
    assert other.verify()["ok"] is True


def test_operations(client: TestClient, cluster: str) -> None:
    api = Api(client, cluster)
    api.put_node("n1", node(cpu="4"))
    api.submit(workload("w", 1, cpu="8"))  # pending: a queue length
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json() == {"status": "ready", "checks": {"database": True, "schema": True,
                                                                     "replica": True}}
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    for family, kind in [("gangplank_http_requests_total", "counter"),
                         ("gangplank_http_request_duration_seconds", "histogram"),
                         ("gangplank_decisions_total", "counter"),
                         ("gangplank_decision_seconds", "histogram"),
                         ("gangplank_queue_length", "gauge"),
                         ("gangplank_events_appended_total", "counter"),
                         ("gangplank_kafka_lag", "gauge")]:
        assert f"# TYPE {family} {kind}" in text, family
    assert f'gangplank_queue_length{{cluster="{cluster}"}} 1.0' in text
    assert 'gangplank_decisions_total{type="PodGroupUnschedulable"}' in text
    assert 'gangplank_http_requests_total{method="POST",route="/v1/clusters/{cluster}/namespaces/' \
           '{namespace}/workloads",status="201"}' in text
    assert client.get("/schema/openapi.json").json()["openapi"].startswith("3.1")


def test_state_beyond_the_head_and_an_empty_cluster(client: TestClient, cluster: str) -> None:
    """docs/http.md, *Audit reads*: at beyond the head is the state now (its position says so); a cluster
    with no events reads as empty, and a single missing object is a 404."""
    api = Api(client, cluster)
    assert api.get("/state").json() == {"position": 0, "nodes": [], "workloads": [], "finishedWorkloads": 0}
    assert api.get("/state", params={"at": 5}).json()["position"] == 0
    assert api.get("/nodes").json() == {"items": []} and api.get("/nodes/n1").status_code == 404
    assert api.verify() == {"ok": True, "events": 0, "head": GENESIS_HASH}
    api.put_node("n1", node(cpu="4"))
    api.submit(workload("w", 1, cpu="1"))
    last = api.last_position()
    beyond = api.get("/state", params={"at": last + 1000}).json()
    assert beyond == api.get("/state").json() and beyond["position"] == last
