"""The OpenAPI document describes every answer (http.md, *Operations*): each route's success body and
every status it answers, security only when tokens are configured, and an interactive page whose
assets the service serves itself. Real answers (the application over the in-memory store) are
validated against the document's schemas, so a view that changes without its schema fails here."""
from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from litestar.testing import TestClient

from service.api import ApiSettings, create_app
from service.api.openapi import ANSWERS
from service.app.service import Gangplank
from service.store import open_store
from service.store.memory import discard_database
from tests.api.conftest import ADMIN, TOKENS, RecordingGangplank, bearer

C = "/v1/clusters/prod"
MUTATING = {"put", "post", "delete"}


def _document(settings: ApiSettings) -> dict[str, Any]:
    with TestClient(create_app(RecordingGangplank(), settings)) as client:  # type: ignore[arg-type]
        document: dict[str, Any] = client.get("/schema/openapi.json").json()
    return document


@pytest.fixture(scope="module")
def open_document() -> dict[str, Any]:
    return _document(ApiSettings())


@pytest.fixture(scope="module")
def secured_document() -> dict[str, Any]:
    return _document(ApiSettings(tokens=TOKENS))


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            yield method, path, operation


def test_every_operation_describes_its_success_body(open_document):
    schemas = open_document["components"]["schemas"]
    for method, path, operation in _operations(open_document):
        success = {s: r for s, r in operation["responses"].items() if s.startswith("2")}
        assert success, (method, path)
        for response in success.values():
            assert response.get("content"), f"{operation['operationId']}: add its answer to openapi.ANSWERS"
            (media, content), = response["content"].items()
            if operation["operationId"] == "metrics":
                assert media == "text/plain"
                continue
            assert media == "application/json"
            name = content["schema"]["$ref"].removeprefix("#/components/schemas/")
            assert schemas[name]["properties"], (method, path)
    assert set(ANSWERS) | {"metrics"} >= {op["operationId"] for _, _, op in _operations(open_document)}
    assert {"Version", "Health", "Readiness"} <= schemas.keys()  # GET /version's, once the route is in


# every status each route answers, when the server runs open (secured adds 401 and 403 to every
# route but the operations')
STATUSES = {
    ("get", "/healthz"): {"200", "422"},
    ("get", "/readyz"): {"200", "422", "503"},
    ("get", "/metrics"): {"200", "422"},
    ("get", "/v1/clusters"): {"200", "422"},
    ("put", f"{C}/nodes/{{name}}"): {"200", "409", "413", "415", "422"},
    ("get", f"{C}/nodes/{{name}}"): {"200", "404", "422"},
    ("delete", f"{C}/nodes/{{name}}"): {"200", "404", "409", "413", "422"},
    ("get", f"{C}/nodes"): {"200", "422"},
    ("post", f"{C}/namespaces/{{namespace}}/workloads"): {"200", "201", "409", "413", "415", "422"},
    ("get", f"{C}/namespaces/{{namespace}}/workloads/{{name}}"): {"200", "404", "422"},
    ("delete", f"{C}/namespaces/{{namespace}}/workloads/{{name}}"): {"200", "404", "409", "413", "422"},
    ("get", f"{C}/namespaces/{{namespace}}/workloads/{{name}}/history"): {"200", "404", "422"},
    ("get", f"{C}/events"): {"200", "422"},
    ("get", f"{C}/state"): {"200", "422"},
    ("get", f"{C}/audit/verify"): {"200", "422"},
}


@pytest.mark.parametrize(("method", "path"), sorted(STATUSES))
def test_every_status_a_route_answers_is_described(open_document, secured_document, method, path):
    template = path.replace("/v1/clusters/prod", "/v1/clusters/{cluster}")
    assert set(open_document["paths"][template][method]["responses"]) == STATUSES[method, path]
    secured = set(secured_document["paths"][template][method]["responses"])
    extra = set() if template in ("/healthz", "/readyz", "/metrics") else {"401", "403"}
    assert secured == STATUSES[method, path] | extra
    for status, response in open_document["paths"][template][method]["responses"].items():
        if not status.startswith("2") and status != "200":
            assert response["content"]["application/problem+json"]["schema"] == {
                "$ref": "#/components/schemas/Problem"}


def test_no_security_when_open_bearer_when_tokens_are_configured(open_document, secured_document):
    assert "securitySchemes" not in open_document["components"]
    assert all("security" not in op for _, _, op in _operations(open_document))
    assert secured_document["components"]["securitySchemes"]["bearerToken"] == {
        "type": "http", "scheme": "bearer", "description": "A token of the tokens file (admin, submitter or auditor)."}
    for _, path, operation in _operations(secured_document):
        public = path in ("/healthz", "/version", "/readyz", "/metrics")
        assert ("security" in operation) is not public, path
        if not public:
            assert operation["security"] == [{"bearerToken": []}]


def test_the_interactive_page_loads_nothing_from_elsewhere():
    with TestClient(create_app(RecordingGangplank(), ApiSettings(tokens=TOKENS))) as client:  # type: ignore[arg-type]
        page = client.get("/schema")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert not re.search(r"(src|href)=['\"](https?:)?//", page.text), "a CDN"
        assets = re.findall(r"(?:src|href)=['\"]([^'\"]+)['\"]", page.text)
        assert len(assets) == 4  # the bundle, the preset, the styles, the icon
        types = {".js": "javascript", ".css": "text/css", ".png": "image/png"}
        for asset in assets:
            answer = client.get(asset)  # no token: the page is public, as its document is
            assert answer.status_code == 200, asset
            assert types[asset[asset.rindex("."):]] in answer.headers["content-type"], asset
            assert len(answer.content) > 500, asset
        assert "SwaggerUIBundle" in client.get(next(a for a in assets if a.endswith("-bundle.js"))).text
        assert client.get("/schema/assets/nothing.js").status_code == 404


# -- real answers against the document ---------------------------------------------------------------

@pytest.fixture
def real() -> Iterator[TestClient]:
    name = f"openapi-{uuid.uuid4().hex}"
    app = create_app(Gangplank(open_store(f"memory://{name}")), ApiSettings())
    with TestClient(app) as client:
        yield client
    discard_database(name)


def _check(document: dict[str, Any], method: str, template: str, answer: Any) -> None:
    operation = document["paths"][template][method]
    status = str(answer.status_code)
    assert status in operation["responses"], (method, template, status)
    (media, content), = operation["responses"][status]["content"].items()
    assert answer.headers["content-type"].startswith(media), (method, template, status)
    schema = {**content["schema"], "components": document["components"]}
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in Draft202012Validator(schema).iter_errors(answer.json())]
    assert errors == [], (method, template, status)


def test_real_answers_follow_the_document(real, open_document):
    cpu = {"cpu": "4", "pods": "10"}
    slice_ = {"driver": "gpu.example.com", "pool": {"name": "n1", "generation": 1}, "nodeName": "n1",
              "devices": [{"name": "gpu-0"}]}
    gpu_class = {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}
    fits = {"name": "fits", "resourceClaimTemplates": [{"name": "one", "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}],
            "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 1}},
                           "pods": [{"name": "p", "requests": {"cpu": "1"},
                                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one"}]}]}]}
    waits = {"name": "waits", "priority": 5, "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 2}},
                                                            "pods": [{"name": "p", "count": 2,
                                                                      "requests": {"cpu": "3"}}]}]}
    ns, wl = f"{C}/namespaces/{{namespace}}/workloads", f"{C}/namespaces/{{namespace}}/workloads/{{name}}"
    calls: list[tuple[str, str, str, Any]] = [
        ("put", f"{C}/priorityclasses/{{name}}", f"{C}/priorityclasses/high", {"value": 100}),
        ("put", f"{C}/nodes/{{name}}", f"{C}/nodes/n1", {"allocatable": cpu, "labels": {"r": "a"}}),
        ("put", f"{C}/nodes/{{name}}", f"{C}/nodes/n2?dryRun=true", {"allocatable": cpu}),
        ("put", f"{C}/deviceclasses/{{name}}", f"{C}/deviceclasses/gpu", gpu_class),
        ("put", f"{C}/resourceslices/{{name}}", f"{C}/resourceslices/n1-gpus", slice_),
        ("post", ns, f"{C}/namespaces/team-a/workloads", fits),
        ("post", ns, f"{C}/namespaces/team-a/workloads", waits),
        ("post", ns, f"{C}/namespaces/team-a/workloads?dryRun=true", {**waits, "name": "maybe"}),
        ("post", ns, f"{C}/namespaces/team-a/workloads", waits),  # 409: the name exists
        ("post", ns, f"{C}/namespaces/team-a/workloads", {"name": "Bad"}),  # 422
        ("get", wl, f"{C}/namespaces/team-a/workloads/waits", None),
        ("get", wl, f"{C}/namespaces/team-a/workloads/never", None),  # 404
        ("get", ns, f"{C}/namespaces/team-a/workloads?limit=1", None),
        ("get", f"{C}/workloads", f"{C}/workloads", None),
        ("get", f"{wl}/history", f"{C}/namespaces/team-a/workloads/fits/history", None),
        ("get", f"{C}/nodes", f"{C}/nodes", None),
        ("get", f"{C}/nodes/{{name}}", f"{C}/nodes/n1", None),
        ("get", f"{C}/deviceclasses", f"{C}/deviceclasses", None),
        ("get", f"{C}/deviceclasses/{{name}}", f"{C}/deviceclasses/gpu", None),
        ("get", f"{C}/resourceslices", f"{C}/resourceslices", None),
        ("get", f"{C}/resourceslices/{{name}}", f"{C}/resourceslices/n1-gpus", None),
        ("get", f"{C}/priorityclasses", f"{C}/priorityclasses", None),
        ("get", f"{C}/priorityclasses/{{name}}", f"{C}/priorityclasses/high", None),
        ("get", f"{C}/events", f"{C}/events?after=0&limit=5", None),
        ("get", f"{C}/state", f"{C}/state", None),
        ("get", f"{C}/audit/verify", f"{C}/audit/verify", None),
        ("get", "/v1/clusters", "/v1/clusters", None),
        ("delete", f"{C}/resourceslices/{{name}}", f"{C}/resourceslices/n1-gpus", None),
        ("delete", f"{C}/deviceclasses/{{name}}", f"{C}/deviceclasses/gpu", None),
        ("delete", wl, f"{C}/namespaces/team-a/workloads/fits", None),
        ("delete", f"{C}/nodes/{{name}}", f"{C}/nodes/n1", None),
        ("delete", f"{C}/nodes/{{name}}", f"{C}/nodes/n1", None),  # 404
        ("get", f"{C}/state", f"{C}/state?at=3&includeFinished=true", None),
        ("get", "/healthz", "/healthz", None),
        ("get", "/readyz", "/readyz", None),
    ]
    seen = set()
    for method, template, url, body in calls:
        answer = real.request(method.upper(), url, json=body)
        seen.add((template.replace("/v1/clusters/prod", "/v1/clusters/{cluster}"), method, answer.status_code))
        _check(open_document, method, template.replace("/v1/clusters/prod", "/v1/clusters/{cluster}"), answer)
    assert {s for _, _, s in seen} == {200, 201, 404, 409, 422}
    big = real.put(f"{C}/nodes/n3", content=b"{" + b" " * (1 << 20) + b"}", headers={"Content-Type": "application/json"})
    _check(open_document, "put", "/v1/clusters/{cluster}/nodes/{name}", big)
    assert big.status_code == 413


def test_secured_refusals_follow_the_document(secured_document):
    with TestClient(create_app(RecordingGangplank(), ApiSettings(tokens=TOKENS))) as client:  # type: ignore[arg-type]
        refused = client.get(f"{C}/nodes")
        assert refused.status_code == 401
        _check(secured_document, "get", "/v1/clusters/{cluster}/nodes", refused)
        forbidden = client.put(f"{C}/nodes/n1", json={"allocatable": {"cpu": "1"}},
                               headers=bearer(next(t for t, g in TOKENS.items() if g.role == "auditor")))
        assert forbidden.status_code == 403
        _check(secured_document, "put", "/v1/clusters/{cluster}/nodes/{name}", forbidden)
        assert client.get(f"{C}/nodes", headers=bearer(ADMIN)).status_code == 200


def test_not_ready_is_a_described_503():
    service = RecordingGangplank()
    service.ready = False
    with TestClient(create_app(service, ApiSettings())) as client:  # type: ignore[arg-type]
        document = client.get("/schema/openapi.json").json()
        answer = client.get("/readyz")
        assert answer.status_code == 503
        _check(document, "get", "/readyz", answer)
