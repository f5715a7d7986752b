"""Issue 18, point 7: Content-Type (415), the 413's limit, one style of error messages, GET /version."""
from __future__ import annotations

import json
from typing import Any

import pytest
from litestar.testing import TestClient

from service.schemas.errors import from_msgspec, message_style
from tests.api.conftest import (
    ADMIN,
    AUDITOR,
    BASE,
    BODY_ROUTES,
    SUBMITTER,
    WILDCARD,
    RecordingGangplank,
    bearer,
)

NOT_JSON = ["text/plain", "application/x-www-form-urlencoded", "application/xml", "multipart/form-data; boundary=x",
            "application/yaml", "application/jsonx", "text/json", "json", "application/+json"]
JSON_TYPES = ["application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8",
              "application/merge-patch+json", "application/vnd.kubernetes+json"]


@pytest.mark.parametrize("content_type", NOT_JSON)
@pytest.mark.parametrize(("method", "path", "template"), BODY_ROUTES)
def test_a_body_that_is_not_json_by_content_type_is_415_and_not_executed(
        client: TestClient, service: RecordingGangplank, method: str, path: str, template: dict[str, Any],
        content_type: str) -> None:
    response = client.request(method, path, content=json.dumps(template).encode(),
                              headers={"Content-Type": content_type, "Idempotency-Key": "k1"})
    assert response.status_code == 415, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    doc = response.json()
    assert doc["title"] == "Unsupported Media Type" and doc["type"].endswith("/unsupported-media-type")
    assert content_type in doc["detail"] and "application/json" in doc["detail"]
    assert service.executed == []


@pytest.mark.parametrize("content_type", [*JSON_TYPES, None])
@pytest.mark.parametrize(("method", "path", "template"), BODY_ROUTES)
def test_json_content_types_are_accepted(client: TestClient, service: RecordingGangplank, method: str, path: str,
                                         template: dict[str, Any], content_type: str | None) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}  # none: read as JSON, as Kubernetes does
    response = client.request(method, path, content=json.dumps(template).encode(), headers=headers)
    assert response.status_code in (200, 201), response.text
    assert len(service.executed) == 1


def test_content_type_is_not_checked_where_no_body_is_read(client: TestClient, service: RecordingGangplank) -> None:
    response = client.delete(f"{BASE}/nodes/n1", headers={"Content-Type": "text/plain"})
    assert response.status_code == 200 and len(service.executed) == 1


def test_the_413_detail_states_the_limit(client: TestClient, service: RecordingGangplank) -> None:
    response = client.put(f"{BASE}/nodes/n1", content=b" " * (1024 * 1024 + 1))
    assert response.status_code == 413
    assert "1 MiB" in response.json()["detail"]
    assert service.executed == []


@pytest.mark.parametrize("token", [None, ADMIN, SUBMITTER, AUDITOR, WILDCARD])
def test_version_is_open_to_every_role(secured: TestClient, token: str | None) -> None:
    from importlib.metadata import version

    from service.domain.model.rules import RULES

    response = secured.get("/version", headers=bearer(token) if token else {})
    assert response.status_code == 200
    assert response.json() == {"version": version("gangplank"), "api": "v1", "rules": RULES}


# -- one style of messages: pydantic's, whoever produced them -------------------------------------

@pytest.mark.parametrize(("query", "loc", "msg"), [
    ("/events?limit=abc", ["query", "limit"], "Input should be a valid integer"),
    ("/events?limit=0", ["query", "limit"], "Input should be greater than or equal to 1"),
    ("/events?limit=1001", ["query", "limit"], "Input should be less than or equal to 1000"),
    ("/events?wait=soon", ["query", "wait"], "Input should be a valid number"),
    ("/state?at=now", ["query", "at"], "Input should be a valid integer"),
    ("/state?includeFinished=maybe", ["query", "includeFinished"], "Input should be a valid boolean"),
    ("/workloads?phase=Running", ["query", "phase"], "Input should be 'Pending', 'Scheduled', 'Completed' or 'Finished'"),
])
def test_query_errors_read_as_pydantic_does(client: TestClient, query: str, loc: list[str], msg: str) -> None:
    response = client.get(BASE + query)
    assert response.status_code == 422
    assert {"loc": loc, "msg": msg} in response.json()["errors"]


def test_body_and_own_messages_share_the_style(client: TestClient) -> None:
    body_errors = client.post(f"{BASE}/namespaces/team-a/workloads", json={"podGroups": "x"}).json()["errors"]
    assert {"loc": ["body", "name"], "msg": "Field required"} in body_errors
    own = client.put(f"{BASE}/nodes/n1?dryRun=maybe", json={}, headers={"Idempotency-Key": ""}).json()["errors"]
    assert own and all(e["msg"][0].isupper() for e in own), own
    repeated = client.get(f"{BASE}/events?limit=1&limit=2").json()["errors"]
    assert repeated == [{"loc": ["query", "limit"], "msg": "Given more than once"}]


def test_message_style_keeps_identifiers_and_unknown_texts() -> None:
    assert message_style("must not be empty") == "Must not be empty"
    assert message_style("minCount must be at most 4") == "minCount must be at most 4"  # an identifier stays
    assert message_style("example.com/gpu: unknown") == "example.com/gpu: unknown"
    assert message_style("Field required") == "Field required"
    assert from_msgspec("Expected `int | null`, got `str`") == "Input should be a valid integer"
    assert from_msgspec("Expected `float` > 0.5") == "Input should be greater than 0.5"
    assert from_msgspec("Invalid enum value 'x'", ["a"]) == "Input should be 'a'"
    assert from_msgspec("Invalid enum value 'x'") == "Input should be one of the allowed values"
    assert from_msgspec("something new") == "Something new"
