"""No input, however malformed, gives a 5xx; and nothing that fails validation reaches execute()."""
from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

from service.api import ApiSettings, create_app
from tests.api.conftest import BASE, BODY_ROUTES, MUTATING_ROUTES, RESOURCE_SLICE, WORKLOAD, RecordingGangplank

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20)
           | st.sampled_from(["", "0", "1", "-1", "500m", "1.5", "64Gi", "1e3", "0.5m", "Single", "All", "gang",
                              "ExactCount", "device.driver == 'x'", "((", "a" * 300, "\u00e9", "n1", "team-a"]))
json_values = st.recursive(scalars, lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(st.text(max_size=12), children, max_size=4), max_leaves=12)


def _paths(document: Any, prefix: tuple = ()) -> list[tuple]:
    paths = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            paths.extend(_paths(value, (*prefix, key)))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            paths.extend(_paths(value, (*prefix, index)))
    return paths


@st.composite
def mutated(draw: st.DrawFn, template: dict[str, Any]) -> Any:
    """A valid body with a few random changes: a value replaced, a key dropped or added."""
    document: Any = copy.deepcopy(template)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(document)
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if not path:
            document = draw(json_values) if action == "replace" else document
            continue
        parent = document
        for part in path[:-1]:
            parent = parent[part]
        if action == "replace":
            parent[path[-1]] = draw(json_values)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent[path[-1]], dict):
            parent[path[-1]][draw(st.text(max_size=12))] = draw(json_values)
        elif isinstance(parent[path[-1]], list):
            parent[path[-1]].append(draw(json_values))
    return document


def _encode(document: Any) -> bytes:
    return json.dumps(document, allow_nan=True).encode("utf-8", "surrogatepass")


def _check(client: TestClient, service: RecordingGangplank, method: str, url: str, raw: bytes | None,
           headers: dict[str, Any] | None = None) -> int:
    before = len(service.executed)
    response = client.request(method, url, content=raw, headers=headers or {})
    status = response.status_code
    assert status < 500, (method, url, raw[:200] if raw else raw, response.text)
    if status >= 400:
        assert response.headers["content-type"].startswith("application/problem+json")
        assert len(service.executed) == before, "a rejected request reached execute()"
    else:
        assert len(service.executed) == before + 1
    return status


def _client() -> tuple[TestClient, RecordingGangplank]:
    service = RecordingGangplank()
    return TestClient(create_app(service, ApiSettings()), raise_server_exceptions=True), service


def test_random_json_bodies():
    client, service = _client()
    with client:
        @FUZZ
        @given(route=st.sampled_from(MUTATING_ROUTES), document=json_values)
        def run(route, document):
            method, url, _ = route
            _check(client, service, method, url, _encode(document))
        run()


def test_mutated_valid_bodies():
    client, service = _client()
    with client:
        @FUZZ
        @given(data=st.data(), route=st.sampled_from(BODY_ROUTES))
        def run(data, route):
            method, url, template = route
            _check(client, service, method, url, _encode(data.draw(mutated(template))))
        run()


def test_random_bytes():
    client, service = _client()
    with client:
        @FUZZ
        @given(route=st.sampled_from(MUTATING_ROUTES),
               raw=st.binary(max_size=300) | st.sampled_from([b"\xef\xbb\xbf{}", b'"\\ud800"', b"[" * 5000,
                                                              b"{" * 100_000, b"1e999999", b"-" * 10]))
        def run(route, raw):
            method, url, _ = route
            _check(client, service, method, url, raw)
        run()


segment = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="/"), min_size=1, max_size=70)
header_value = st.binary(max_size=300).filter(lambda b: not any(c in b for c in b"\r\n\x00"))


def test_random_paths_headers_and_queries():
    client, service = _client()
    with client:
        @FUZZ
        @given(data=st.data(), route=st.sampled_from(MUTATING_ROUTES), cluster=segment, name=segment,
               key=st.none() | header_value, query=st.text(max_size=30))
        def run(data, route, cluster, name, key, query):
            method, url, template = route
            parts = url.split("?")[0].split("/")
            parts[3] = quote(cluster, safe="")
            parts[-1 if parts[-1] != "workloads" else -2] = quote(name, safe="")
            target = "/".join(parts) + "?" + quote(query, safe="=&")
            raw = _encode(template) if template is not None else None
            _check(client, service, method, target, raw, {"Idempotency-Key": key} if key is not None else None)
        run()


def test_random_read_queries():
    client, service = _client()
    with client:
        @FUZZ
        @given(path=st.sampled_from(["events", "workloads", "state", "nodes", "audit/verify"]),
               params=st.dictionaries(st.sampled_from(["after", "limit", "wait", "at", "phase", "namespace", "x"]),
                                      st.text(max_size=12) | st.integers().map(str), max_size=4))
        def run(path, params):
            query = "&".join(f"{quote(k)}={quote(v, safe='')}" for k, v in params.items())
            response = client.get(f"{BASE}/{path}?{query}")
            assert response.status_code < 500, response.text
        run()


@FUZZ
@given(mutated(WORKLOAD))
def test_the_cross_field_check_never_raises(document):
    """service.schemas.validate.workload_cross_field_errors runs on raw JSON that failed validation:
    whatever it holds, it answers a list (validate_body would swallow a failure: this keeps it honest)."""
    from service.schemas.validate import workload_cross_field_errors

    if isinstance(document, dict):
        assert isinstance(workload_cross_field_errors(document), list)


@FUZZ
@given(mutated(RESOURCE_SLICE))
def test_the_slice_cross_field_check_never_raises(document):
    from service.schemas.validate import slice_cross_field_errors

    if isinstance(document, dict):
        assert isinstance(slice_cross_field_errors(document), list)
