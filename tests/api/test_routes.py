"""Reads, operations, unknown routes and the problem format."""
from __future__ import annotations

import json
from typing import Any

import pytest
from litestar.testing import TestClient

from service.api import ApiSettings, create_app
from service.logging import configure_logging
from service.store.base import StoreUnavailable
from tests.api.conftest import BASE, NODE, RecordingGangplank


def is_problem(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    document = response.json()
    assert document["status"] == status
    assert all(isinstance(document[k], str) and document[k] for k in ("type", "title", "detail"))
    return document


@pytest.mark.parametrize(("method", "url"), [
    ("GET", "/"), ("GET", "/v1"), ("GET", "/v2/clusters"), ("PUT", f"{BASE}/nodes"), ("GET", f"{BASE}/pods"),
    ("GET", f"{BASE}/nodes/n1/extra"), ("POST", f"{BASE}/namespaces/team-a/workloads/x/history"),
])
def test_unknown_route_is_a_404_problem(client, service, method, url):
    # PUT .../nodes and POST .../history exist as paths for other methods: 405, else 404
    response = client.request(method, url)
    assert response.status_code in (404, 405)
    is_problem(response, response.status_code)
    assert service.calls == []


@pytest.mark.parametrize(("method", "url", "allowed"), [
    ("POST", f"{BASE}/nodes/n1", {"GET", "PUT", "DELETE"}),
    ("PATCH", f"{BASE}/namespaces/team-a/workloads/w", {"GET", "DELETE"}),
    ("DELETE", f"{BASE}/priorityclasses/high", {"GET", "PUT"}),
    ("PUT", f"{BASE}/namespaces/team-a/workloads", {"POST"}),
    ("POST", "/healthz", {"GET"}),
])
def test_wrong_method_is_a_405_problem(client, service, method, url, allowed):
    response = client.request(method, url, json={})
    is_problem(response, 405)
    assert allowed <= {m.strip() for m in response.headers["allow"].split(",")}
    assert service.calls == []


def test_inventory_reads(client, service):
    service.views = {"nodes": [{"name": "n1"}], ("node", "n1"): {"name": "n1"}, "deviceclasses": [{"name": "gpu"}],
                     ("resourceslices", "s1"): {"name": "s1"}}
    assert client.get(f"{BASE}/nodes").json() == {"items": [{"name": "n1"}]}
    assert client.get(f"{BASE}/nodes/n1").json() == {"name": "n1"}
    assert client.get(f"{BASE}/deviceclasses").json() == {"items": [{"name": "gpu"}]}
    assert client.get(f"{BASE}/resourceslices/s1").json() == {"name": "s1"}
    assert client.get(f"{BASE}/priorityclasses").json() == {"items": []}
    assert ("list_objects", ("prod", "deviceclasses")) in service.calls
    assert ("get_object", ("prod", "resourceslices", "s1")) in service.calls


@pytest.mark.parametrize("url", [f"{BASE}/nodes/n9", f"{BASE}/deviceclasses/x", f"{BASE}/resourceslices/x",
                                 f"{BASE}/priorityclasses/x", f"{BASE}/namespaces/team-a/workloads/w",
                                 f"{BASE}/namespaces/team-a/workloads/w/history"])
def test_unknown_object_is_a_404_problem(client, service, url):
    assert "'prod'" in is_problem(client.get(url), 404)["detail"]


def test_workload_reads(client, service):
    service.views = {("workload", "team-a", "w"): {"name": "w"}, ("history", "team-a", "w"): {"events": []}}
    assert client.get(f"{BASE}/namespaces/team-a/workloads/w").json() == {"name": "w"}
    assert client.get(f"{BASE}/namespaces/team-a/workloads/w/history").json() == {"events": []}
    assert client.get(f"{BASE}/workloads").json() == {"items": [], "next": None}
    client.get(f"{BASE}/workloads?namespace=team-a&phase=Finished&limit=5&after=12")
    assert [c for c in service.calls if c[0] == "list_workloads"] == [
        ("list_workloads", ("prod", None, None, 100, 0)),
        ("list_workloads", ("prod", "team-a", "Finished", 5, 12)),
    ]


def test_a_namespace_lists_its_workloads_on_the_kubernetes_path(client, secured, service):
    """`GET .../namespaces/{ns}/workloads` (what `kubectl get -n` asks) is the list of that namespace."""
    assert client.get(f"{BASE}/namespaces/team-a/workloads?phase=Pending&limit=5&after=3").json() == \
        {"items": [], "next": None}
    assert [c for c in service.calls if c[0] == "list_workloads"] == [
        ("list_workloads", ("prod", "team-a", "Pending", 5, 3))]
    assert is_problem(client.get(f"{BASE}/namespaces/Team_A/workloads"), 422)["errors"][0]["loc"] == \
        ["path", "namespace"]
    from tests.api.conftest import SUBMITTER, bearer
    assert secured.get(f"{BASE}/namespaces/team-a/workloads", headers=bearer(SUBMITTER)).status_code == 200
    assert secured.get(f"{BASE}/namespaces/team-b/workloads", headers=bearer(SUBMITTER)).status_code == 403


def test_an_empty_query_value_is_as_if_absent(client, service):
    """http.md writes the list as `GET /workloads?namespace=&phase=&limit=&after=`: an empty value
    means "not given" (as Kubernetes reads `?limit=` or `?labelSelector=`), not a 422."""
    assert client.get(f"{BASE}/workloads?namespace=&phase=&limit=&after=").status_code == 200
    assert client.get(f"{BASE}/workloads?namespace=team-a&limit=&after").status_code == 200
    assert client.get(f"{BASE}/events?after=&limit=&wait=").status_code == 200
    assert client.get(f"{BASE}/state?at=").status_code == 200
    assert [c for c in service.calls if c[0] in ("list_workloads", "events", "state_at")] == [
        ("list_workloads", ("prod", None, None, 100, 0)),
        ("list_workloads", ("prod", "team-a", None, 100, 0)),
        ("events", ("prod", 0, 100, 0.0)),
        ("state_at", ("prod", None)),
    ]
    # a value that is there is still checked
    assert is_problem(client.get(f"{BASE}/workloads?limit=0&phase="), 422)["errors"][0]["loc"] == ["query", "limit"]


def test_audit_reads(client, service):
    assert client.get(f"{BASE}/events").json() == {"events": [], "lastPosition": 0}
    client.get(f"{BASE}/events?after=7&limit=1000&wait=2.5")
    client.get(f"{BASE}/events?wait=30&limit=1")
    assert [c[1] for c in service.calls if c[0] == "events"] == [("prod", 0, 100, 0.0), ("prod", 7, 1000, 2.5),
                                                                  ("prod", 0, 1, 30.0)]
    assert client.get(f"{BASE}/state").json()["position"] == 0
    assert client.get(f"{BASE}/state?at=4").json()["position"] == 4
    assert client.get(f"{BASE}/audit/verify").json()["ok"] is True
    assert client.get("/v1/clusters").json() == {"items": [{"name": "prod", "lastPosition": 3}]}


def test_health_and_readiness(client, service):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready", "checks": {"database": True}}
    service.ready = False
    assert is_problem(client.get("/readyz"), 503)["checks"] == {"database": False}


def test_readiness_that_raises_is_503_not_500():
    class Broken(RecordingGangplank):
        async def readiness(self):
            raise ConnectionError("database down")

    with TestClient(create_app(Broken(), ApiSettings())) as client:
        is_problem(client.get("/readyz"), 503)


@pytest.mark.parametrize("failure", [
    ConnectionRefusedError("connection refused"),
    StoreUnavailable("OperationalError: no such table: events"),  # as the store translates them
    StoreUnavailable("InterfaceError: connection is closed"),
    StoreUnavailable('ProgrammingError: relation "events" does not exist'),
    TimeoutError("pool timeout"),
    StoreUnavailable("OperationalError: unable to open database file"),
], ids=["refused", "operational", "interface", "no schema", "timeout", "store unavailable"])
def test_an_unavailable_store_is_503_with_retry_after(failure):
    """The event store down or not migrated (`serve --no-migrate`): the service cannot answer now,
    which is a 503 problem the caller may retry (as /readyz says), not an internal error."""
    class Down(RecordingGangplank):
        async def execute(self, *args, **kwargs):
            raise failure

        async def list_nodes(self, cluster):
            raise failure

    with TestClient(create_app(Down(), ApiSettings()), raise_server_exceptions=False) as client:
        for response in (client.put(f"{BASE}/nodes/n1", json=NODE), client.get(f"{BASE}/nodes")):
            doc = is_problem(response, 503)
            assert doc["type"].endswith("/service-unavailable") and response.headers["retry-after"]


def test_metrics(client, service):
    client.put(f"{BASE}/nodes/n1", json=NODE)
    client.get("/definitely/not/here")
    text = client.get("/metrics").text
    assert 'gangplank_http_requests_total{method="PUT",route="/v1/clusters/{cluster}/nodes/{name}",status="200"}' in text
    assert 'route="unmatched",status="404"' in text
    assert "gangplank_http_request_duration_seconds_bucket" in text
    for name in ("gangplank_decisions_total", "gangplank_queue_length", "gangplank_events_appended_total",
                 "gangplank_kafka_lag", "gangplank_decision_seconds"):
        assert f"# TYPE {name.removesuffix('_total')}" in text
    openmetrics = client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")


def test_openapi_document_and_page(client):
    document = client.get("/schema/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    put_node = document["paths"]["/v1/clusters/{cluster}/nodes/{name}"]["put"]
    assert put_node["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Node"}
    assert {"409", "413", "415", "422"} <= put_node["responses"].keys()  # open: no 401/403 (test_openapi.py)
    submit = document["paths"]["/v1/clusters/{cluster}/namespaces/{namespace}/workloads"]["post"]
    assert submit["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/Workload")
    assert {"Node", "Workload", "PodGroup", "Problem", "ResourceSlice"} <= document["components"]["schemas"].keys()
    page = client.get("/schema")
    assert page.status_code == 200 and "html" in page.headers["content-type"]


def test_unexpected_failure_is_a_logged_500_problem(capsys):
    class Failing(RecordingGangplank):
        async def list_nodes(self, cluster):
            raise RuntimeError("bug")

    configure_logging()  # what `gangplank serve` runs: JSON lines on stderr
    with TestClient(create_app(Failing(), ApiSettings()), raise_server_exceptions=False) as client:
        capsys.readouterr()
        document = is_problem(client.get(f"{BASE}/nodes"), 500)
        assert "bug" not in document["detail"]  # no internals leak
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    logged = [line for line in lines if line.get("event") == "api.unhandled"]
    assert len(logged) == 1 and logged[0]["level"] == "error"
    assert "Traceback" in logged[0]["exception"] and 'RuntimeError: bug' in logged[0]["exception"]


def test_unknown_schema_paths_are_problem_details(client):
    for path in ("/schema/foo", "/schema/redoc", "/schema/openapi.jsonx"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["status"] == 404
    assert client.get("/schema/openapi.json").status_code == 200
