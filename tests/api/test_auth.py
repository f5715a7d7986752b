"""Access (http.md): bearer tokens, roles, 401/403 as problem details, nothing recorded."""
from __future__ import annotations

import hashlib
import json

import pytest

from service.api import ApiSettings, TokenFileError, load_tokens, resolve_bind_host
from service.api.settings import is_open
from tests.api.conftest import ADMIN, AUDITOR, BASE, NODE, SUBMITTER, WILDCARD, WORKLOAD, bearer

TEAM_A = f"{BASE}/namespaces/team-a/workloads"
TEAM_B = f"{BASE}/namespaces/team-b/workloads"

# (method, url, body): every route that needs a token
PROTECTED = [
    ("GET", "/v1/clusters", None),
    ("GET", f"{BASE}/nodes", None),
    ("GET", f"{BASE}/nodes/n1", None),
    ("PUT", f"{BASE}/nodes/n1", NODE),
    ("DELETE", f"{BASE}/nodes/n1", None),
    ("GET", f"{BASE}/priorityclasses", None),
    ("PUT", f"{BASE}/priorityclasses/high", {"value": 1}),
    ("POST", TEAM_A, WORKLOAD),
    ("GET", f"{TEAM_A}/train-7", None),
    ("DELETE", f"{TEAM_A}/train-7", None),
    ("GET", f"{TEAM_A}/train-7/history", None),
    ("GET", f"{BASE}/workloads", None),
    ("GET", f"{BASE}/events", None),
    ("GET", f"{BASE}/state", None),
    ("GET", f"{BASE}/audit/verify", None),
]


def status(client, method, url, payload, token=None, **kwargs):
    headers = bearer(token) if token else {}
    return client.request(method, url, json=payload, headers=headers, **kwargs)


@pytest.mark.parametrize(("method", "url", "payload"), PROTECTED)
@pytest.mark.parametrize("authorization", [None, "Bearer nope", "Basic YWRtaW46eA==", "Bearer", f"bearer  {ADMIN}x",
                                           ADMIN])
def test_without_a_valid_token_401(secured, service, method, url, payload, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    response = secured.request(method, url, json=payload, headers=headers)
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["status"] == 401
    assert service.calls == []


def test_the_scheme_is_case_insensitive(secured, service):
    assert secured.get(f"{BASE}/nodes", headers={"Authorization": f"bearer {ADMIN}"}).status_code == 200


def test_401_comes_before_validation(secured, service):
    assert secured.put("/v1/clusters/BAD/nodes/n1", content=b"{not json").status_code == 401


def test_401_comes_before_reading_the_body(secured, service):
    assert secured.put(f"{BASE}/nodes/n1", content=b"x" * (2 * 1024 * 1024)).status_code == 401


@pytest.mark.parametrize("url", ["/healthz", "/readyz", "/metrics", "/schema/openapi.json", "/schema"])
def test_operations_need_no_token(secured, url):
    assert secured.get(url).status_code == 200


@pytest.mark.parametrize(("method", "url", "payload"), PROTECTED)
def test_admin_may_do_everything(secured, service, method, url, payload):
    response = status(secured, method, url, payload, ADMIN)
    assert response.status_code in (200, 201, 404), response.text


@pytest.mark.parametrize(("method", "url", "payload", "allowed"), [
    ("GET", "/v1/clusters", None, True),
    ("GET", f"{BASE}/nodes", None, True),
    ("GET", f"{BASE}/resourceslices", None, True),
    ("GET", f"{TEAM_B}/x", None, True),
    ("GET", f"{TEAM_B}/x/history", None, True),
    ("GET", f"{BASE}/workloads", None, True),
    ("GET", f"{BASE}/events?wait=0", None, True),
    ("GET", f"{BASE}/state?at=3", None, True),
    ("GET", f"{BASE}/audit/verify", None, True),
    ("PUT", f"{BASE}/nodes/n1", NODE, False),
    ("DELETE", f"{BASE}/nodes/n1", None, False),
    ("PUT", f"{BASE}/deviceclasses/gpu", {}, False),
    ("POST", TEAM_A, WORKLOAD, False),
    ("DELETE", f"{TEAM_A}/train-7", None, False),
])
def test_auditor_reads_everything_and_writes_nothing(secured, service, method, url, payload, allowed):
    response = status(secured, method, url, payload, AUDITOR)
    if allowed:
        assert response.status_code in (200, 404), response.text
    else:
        assert response.status_code == 403
        assert response.headers["content-type"].startswith("application/problem+json")
        assert service.calls == []


@pytest.mark.parametrize(("method", "url", "payload", "allowed"), [
    ("GET", "/v1/clusters", None, True),
    ("GET", f"{BASE}/nodes", None, True),
    ("GET", f"{BASE}/nodes/n1", None, True),
    ("GET", f"{BASE}/deviceclasses", None, True),
    ("POST", TEAM_A, WORKLOAD, True),
    ("POST", f"{TEAM_A}?dryRun=true", WORKLOAD, True),
    ("GET", f"{TEAM_A}/train-7", None, True),
    ("GET", f"{TEAM_A}/train-7/history", None, True),
    ("DELETE", f"{TEAM_A}/train-7", None, True),
    ("GET", f"{BASE}/workloads?namespace=team-a", None, True),
    ("POST", TEAM_B, WORKLOAD, False),
    ("GET", f"{TEAM_B}/train-7", None, False),
    ("DELETE", f"{TEAM_B}/train-7", None, False),
    ("GET", f"{TEAM_B}/train-7/history", None, False),
    ("GET", f"{BASE}/workloads", None, False),
    ("GET", f"{BASE}/workloads?namespace=team-b", None, False),
    ("GET", f"{BASE}/workloads?namespace=team-a&namespace=team-b", None, False),
    ("GET", f"{BASE}/workloads?namespace=team-b&namespace=team-a", None, False),
    ("PUT", f"{BASE}/nodes/n1", NODE, False),
    ("DELETE", f"{BASE}/nodes/n1", None, False),
    ("PUT", f"{BASE}/priorityclasses/high", {"value": 1}, False),
    ("GET", f"{BASE}/events", None, False),
    ("GET", f"{BASE}/state", None, False),
    ("GET", f"{BASE}/audit/verify", None, False),
])
def test_submitter_acts_in_its_namespaces(secured, service, method, url, payload, allowed):
    response = status(secured, method, url, payload, SUBMITTER)
    if allowed:
        assert response.status_code in (200, 201, 404), response.text
    else:
        assert response.status_code == 403, response.text
        assert response.json()["status"] == 403
        assert service.calls == []


def test_403_comes_before_validation(secured, service):
    response = secured.post(TEAM_B, content=b"{broken", headers=bearer(SUBMITTER))
    assert response.status_code == 403


def test_a_wildcard_submitter_covers_every_namespace(secured, service):
    assert status(secured, "POST", f"{BASE}/namespaces/team-z/workloads", WORKLOAD, WILDCARD).status_code == 201
    assert status(secured, "GET", f"{BASE}/workloads?namespace=team-q", None, WILDCARD).status_code == 200
    assert status(secured, "PUT", f"{BASE}/nodes/n1", NODE, WILDCARD).status_code == 403


def test_the_actor_is_recorded_never_the_token(secured, service):
    status(secured, "POST", TEAM_A, WORKLOAD, SUBMITTER)
    status(secured, "PUT", f"{BASE}/nodes/n1", NODE, ADMIN)
    (_, submitter, _), (_, admin, _) = service.executed
    assert submitter.actor == "ci-bot"
    assert admin.actor == "admin:" + hashlib.sha256(ADMIN.encode()).hexdigest()[:8]
    assert ADMIN not in admin.actor


def test_open_api_acts_as_anonymous(client, service):
    assert client.put(f"{BASE}/nodes/n1", json=NODE).status_code == 200
    assert service.executed[0][1].actor == "anonymous"


# -- the tokens file and the bind address -----------------------------------------------------------

def _write(tmp_path, document) -> str:
    path = tmp_path / "tokens.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def test_load_tokens(tmp_path):
    tokens = load_tokens(_write(tmp_path, {
        "s3cr3t-admin-token": {"role": "admin"},
        "team-a/token+x==": {"role": "submitter", "namespaces": ["team-a", "*"], "name": "ci"},
        "aud1t": {"role": "auditor", "name": "audit"},
    }))
    assert tokens["s3cr3t-admin-token"].role == "admin"
    assert tokens["team-a/token+x=="].namespaces == frozenset({"team-a", "*"})
    assert tokens["aud1t"].name == "audit"
    settings = ApiSettings.from_tokens_file(_write(tmp_path, {"t": {"role": "admin"}}))
    assert not is_open(settings) and is_open(ApiSettings.from_tokens_file(None))


@pytest.mark.parametrize("document", [
    {"adm1n": "admin", "aud1t": "auditor", "sub": {"role": "submitter", "namespaces": ["team-a"]}},
    [{"token": "adm1n", "role": "admin"}, {"token": "aud1t", "role": "auditor"},
     {"token": "sub", "role": "submitter", "namespaces": ["team-a"]}],
    {"tokens": [{"token": "adm1n", "role": "admin"}, {"token": "aud1t", "role": "auditor"},
                {"token": "sub", "role": "submitter", "namespaces": ["team-a"]}]},
], ids=["role strings", "list", "list under tokens"])
def test_other_shapes_of_the_tokens_file(tmp_path, document):
    tokens = load_tokens(_write(tmp_path, document))
    assert {t: g.role for t, g in tokens.items()} == {"adm1n": "admin", "aud1t": "auditor", "sub": "submitter"}
    assert tokens["sub"].namespaces == frozenset({"team-a"})


@pytest.mark.parametrize(("document", "message"), [
    ("{not json", "not JSON"),
    ("[]", "(root)"),
    ({}, "defines no token"),
    ({"super-secret-token": {"role": "root"}}, "role"),
    ({"super-secret-token": {"role": "submitter"}}, "namespaces"),
    ({"super-secret-token": {"role": "submitter", "namespaces": []}}, "namespaces"),
    ({"super-secret-token": {"role": "admin", "namespaces": ["a"]}}, "only for submitters"),
    ({"super-secret-token": {"role": "submitter", "namespaces": ["Team_A"]}}, "DNS-1123"),
    ({"super secret token": {"role": "admin"}}, "bearer token"),
    ({"super-secret-token": {"role": "admin", "extra": 1}}, "extra"),
    ({"super-secret-token": "root"}, "role"),
    ({"super-secret-token": "submitter"}, "namespaces"),
    ([{"token": "super-secret-token", "role": "admin", "extra": 1}], "extra"),
])
def test_bad_tokens_file(tmp_path, document, message):
    with pytest.raises(TokenFileError) as failure:
        load_tokens(_write(tmp_path, document))
    assert message.lower() in str(failure.value).lower()
    assert "super-secret-token" not in str(failure.value) and "super secret token" not in str(failure.value)


def test_tokens_given_inline_as_json():
    """GANGPLANK_TOKENS / --tokens may hold the JSON itself (a container's environment), not only a path."""
    tokens = load_tokens('{"adm1n": {"role": "admin"}, "sub": {"role": "submitter", "namespaces": ["a"]}}')
    assert tokens["adm1n"].role == "admin" and tokens["sub"].namespaces == frozenset({"a"})
    with pytest.raises(TokenFileError) as failure:
        load_tokens('{"super-secret-token": {"role": "root"}')
    assert "super-secret-token" not in str(failure.value)


def test_missing_tokens_file(tmp_path):
    with pytest.raises(TokenFileError):
        load_tokens(str(tmp_path / "nope.json"))


@pytest.mark.parametrize(("tokens", "host", "bound"), [
    ({}, "0.0.0.0", "127.0.0.1"),
    ({}, "example.org", "127.0.0.1"),
    ({}, "127.0.0.1", "127.0.0.1"),
    ({}, "::1", "::1"),
    ({}, "localhost", "localhost"),
    ({"t": "grant"}, "0.0.0.0", "0.0.0.0"),
])
def test_an_open_api_binds_to_loopback_only(tokens, host, bound):
    assert resolve_bind_host(ApiSettings(tokens=tokens), host) == bound  # type: ignore[arg-type]


def test_an_unknown_path_or_method_is_401_without_a_valid_token(secured, service):
    for method, url in (("GET", "/nope"), ("PATCH", f"{BASE}/nodes/n1"), ("GET", f"{BASE}/nodes/n1/extra")):
        anonymous = secured.request(method, url)
        assert anonymous.status_code == 401, (method, url, anonymous.text)
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        assert secured.request(method, url, headers=bearer("wrong")).status_code == 401
        assert secured.request(method, url, headers=bearer(ADMIN)).status_code in (404, 405)
    assert secured.get("/healthz").status_code == 200  # public routes stay public
    assert service.calls == []
