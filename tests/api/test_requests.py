"""Body size limit, Idempotency-Key, commands and answers of the mutating routes."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from service.api import ApiSettings, create_app
from service.app.commands import Accepted, KeyReused, Rejected, Replayed
from service.domain import Rejection
from tests.api.conftest import BASE, MUTATING_ROUTES, NODE, WORKLOAD, body

MIB = 1024 * 1024
NODE_URL = f"{BASE}/nodes/n1"
WL_URL = f"{BASE}/namespaces/team-a/workloads"


# -- 413 ------------------------------------------------------------------------------------------

def _padded(document: dict, size: int) -> bytes:
    raw = json.dumps(document).encode()
    return raw[:-1] + b" " * (size - len(raw)) + b"}"


def test_exactly_one_mib_is_accepted(client, service):
    raw = _padded(NODE, MIB)
    assert len(raw) == MIB
    assert client.put(NODE_URL, content=raw).status_code == 200


@pytest.mark.parametrize("raw", [_padded(NODE, MIB + 1), b"x" * (3 * MIB), b"{" * (MIB + 1)],
                         ids=["valid JSON", "garbage", "deep nesting"])
def test_over_one_mib_is_a_413_whatever_it_holds(client, service, raw):
    response = client.put(NODE_URL, content=raw)
    assert response.status_code == 413
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["status"] == 413
    assert response.json()["title"] == "Content Too Large"  # RFC 9110's name for 413
    assert service.executed == []


def test_a_lying_content_length_is_refused_before_reading(client, service):
    response = client.put(NODE_URL, content=b"{}", headers={"Content-Length": str(MIB + 1)})
    # uvicorn would refuse the mismatch; Litestar already refuses the announced size
    assert response.status_code == 413
    assert service.executed == []


def test_a_streamed_body_is_counted_while_read(client, service):
    def chunks() -> Iterator[bytes]:
        yield b'{"labels": {"a": "'
        for _ in range(20):
            yield b"x" * 65536
        yield b'"}}'
    response = client.put(NODE_URL, content=chunks())  # chunked: no Content-Length
    assert response.status_code == 413
    assert service.executed == []


def test_the_workload_route_has_the_same_limit(client, service):
    doc = body(WORKLOAD)
    doc["podGroups"][0]["pods"][0]["nodeSelector"] = {f"k{i}": "v" * 60 for i in range(20000)}
    assert client.post(WL_URL, json=doc).status_code == 413


# -- Idempotency-Key --------------------------------------------------------------------------------

@pytest.mark.parametrize("key", [b"", b"k" * 256, "clé".encode("latin-1"), b"a\tb", b"\x7f"],
                         ids=["empty", "256 characters", "not ASCII", "tab", "DEL"])
@pytest.mark.parametrize(("method", "url", "payload"), MUTATING_ROUTES[:3] + MUTATING_ROUTES[7:8],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_bad_idempotency_key_is_a_422(client, service, method, url, payload, key):
    response = client.request(method, url, json=payload, headers={"Idempotency-Key": key})
    assert response.status_code == 422
    assert ["header", "Idempotency-Key"] in [e["loc"] for e in response.json()["errors"]]
    assert service.executed == []


async def test_idempotency_key_given_twice_is_a_422(service):
    # httpx's test transport folds repeated headers into one; speak ASGI directly to send two
    app = create_app(service, ApiSettings())
    raw = json.dumps(NODE).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "PUT", "scheme": "http",
             "path": NODE_URL, "raw_path": NODE_URL.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"test"), (b"content-length", str(len(raw)).encode()),
                         (b"idempotency-key", b"a"), (b"idempotency-key", b"b")],
             "client": ("127.0.0.1", 1), "server": ("test", 80), "state": {}}
    messages = [{"type": "http.request", "body": raw, "more_body": False}]
    sent: list[dict] = []

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)
    assert sent[0]["status"] == 422
    problem = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert problem["errors"] == [{"loc": ["header", "Idempotency-Key"], "msg": "Must be given at most once"}]
    assert service.executed == []


def test_bad_key_and_bad_body_are_reported_together(client, service):
    response = client.put(NODE_URL, json={"unschedulable": 1}, headers={"Idempotency-Key": "k" * 300})
    locs = [e["loc"] for e in response.json()["errors"]]
    assert ["header", "Idempotency-Key"] in locs and ["body", "unschedulable"] in locs


def test_key_and_fingerprint_reach_the_service(client, service):
    key = "retry-me: 1 ~ printable ASCII!"
    client.put(NODE_URL, json=NODE, headers={"Idempotency-Key": key})
    client.put(NODE_URL, json=NODE, headers={"Idempotency-Key": key})
    client.put(NODE_URL, json={**NODE, "unschedulable": True}, headers={"Idempotency-Key": key})
    client.put(f"{BASE}/nodes/n2", json=NODE, headers={"Idempotency-Key": key})
    (c1, o1, k1), (c2, o2, k2), (_, _, k3), (_, _, k4) = service.executed
    assert k1["idempotency_key"] == key and o1.command_id == key
    assert len(k1["fingerprint"]) == 64
    assert k1["fingerprint"] == k2["fingerprint"]  # the same request
    assert k3["fingerprint"] != k1["fingerprint"]  # another body
    assert k4["fingerprint"] != k1["fingerprint"]  # another path
    assert c1 == c2


def test_fingerprint_covers_the_method_and_query(client, service):
    key = {"Idempotency-Key": "k1"}
    client.delete(f"{BASE}/nodes/n1", headers=key)
    client.delete(f"{BASE}/deviceclasses/n1", headers=key)
    client.post(WL_URL, json=WORKLOAD, headers=key)
    client.post(f"{WL_URL}?dryRun=false", json=WORKLOAD, headers=key)
    prints = [k["fingerprint"] for _, _, k in service.executed]
    assert len(set(prints)) == 4


def test_without_a_key_each_command_gets_an_id(client, service):
    client.put(NODE_URL, json=NODE)
    client.put(NODE_URL, json=NODE)
    (_, o1, k1), (_, o2, _) = service.executed
    assert k1 == {"idempotency_key": None, "fingerprint": None, "dry_run": False}
    assert o1.command_id and o2.command_id and o1.command_id != o2.command_id
    assert o1.source == "http" and o1.actor == "anonymous"
    assert o1.received_at.endswith("Z") and len(o1.received_at) == len("2026-11-30T10:00:00.000000Z")


def test_a_replayed_answer_says_so(client, service):
    service.result = Replayed(201, {"name": "train-7"})
    response = client.post(WL_URL, json=WORKLOAD, headers={"Idempotency-Key": "k"})
    assert response.status_code == 201
    assert response.headers["Idempotent-Replayed"] == "true"
    assert response.json() == {"name": "train-7"}


# -- commands and answers ---------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "url", "payload", "expected"), [
    ("PUT", f"{BASE}/nodes/n1", NODE, ("UpsertNode", "n1", None)),
    ("DELETE", f"{BASE}/nodes/n1", None, ("RemoveNode", "n1", None)),
    ("PUT", f"{BASE}/deviceclasses/gpu", {"selectors": []}, ("UpsertDeviceClass", "gpu", None)),
    ("DELETE", f"{BASE}/deviceclasses/gpu", None, ("RemoveDeviceClass", "gpu", None)),
    ("PUT", f"{BASE}/resourceslices/s.1", {"driver": "d", "pool": {"name": "p"}, "allNodes": True},
     ("UpsertResourceSlice", "s.1", None)),
    ("DELETE", f"{BASE}/resourceslices/s.1", None, ("RemoveResourceSlice", "s.1", None)),
    ("PUT", f"{BASE}/priorityclasses/high", {"value": 10}, ("UpsertPriorityClass", "high", None)),
    ("POST", WL_URL, WORKLOAD, ("SubmitWorkload", "train-7", "team-a")),
    ("DELETE", f"{WL_URL}/train-7", None, ("DeleteWorkload", "train-7", "team-a")),
])
def test_each_route_runs_its_command(client, service, method, url, payload, expected):
    response = client.request(method, url, json=payload)
    assert response.status_code in (200, 201)
    ((command, origin, _),) = service.executed
    assert (command.type, command.name, command.namespace) == expected
    assert command.cluster == "prod"
    if payload is None:
        assert command.body is None
    else:
        assert command.body == {k: v for k, v in payload.items() if k not in ("name", "namespace")} or \
            command.body == payload


def test_submission_answers_201_with_location(client, service):
    response = client.post(WL_URL, json=WORKLOAD)
    assert response.status_code == 201
    assert response.headers["Location"] == f"{WL_URL}/train-7"
    assert response.headers["content-type"].startswith("application/json")
    ((command, _, _),) = service.executed
    assert command.body == WORKLOAD  # as sent: no defaults filled in


def test_dry_run_executes_without_recording(client, service):
    service.result = Accepted("SubmitWorkload", {"name": "train-7", "dryRun": True}, dry_run=True)
    response = client.post(f"{WL_URL}?dryRun=true", json=WORKLOAD, headers={"Idempotency-Key": "k"})
    assert response.status_code == 200
    ((_, _, kwargs),) = service.executed
    assert kwargs == {"idempotency_key": None, "fingerprint": None, "dry_run": True}


@pytest.mark.parametrize(("method", "url", "payload"), [
    ("POST", WL_URL, WORKLOAD),
    ("PUT", f"{BASE}/nodes/n1", NODE),
    ("DELETE", f"{BASE}/nodes/n1", None),
    ("DELETE", f"{WL_URL}/train-7", None),
])
@pytest.mark.parametrize("value", ["true", "All", "1"])
def test_dry_run_on_every_mutating_route(client, service, method, url, payload, value):
    """`?dryRun=true` (http.md), and Kubernetes' `?dryRun=All`, on every mutating route."""
    response = client.request(method, f"{url}?dryRun={value}", json=payload, headers={"Idempotency-Key": "k"})
    assert response.status_code == 200, response.text
    ((_, _, kwargs),) = service.executed
    assert kwargs == {"idempotency_key": None, "fingerprint": None, "dry_run": True}


def test_a_bad_dry_run_and_a_bad_body_are_named_together(client, service):
    bad = body(WORKLOAD)
    bad["priority"] = "high"
    response = client.post(f"{WL_URL}?dryRun=maybe", json=bad)
    assert response.status_code == 422
    locs = [e["loc"] for e in response.json()["errors"]]
    assert ["query", "dryRun"] in locs and ["body", "priority"] in locs
    assert service.executed == []


@pytest.mark.parametrize(("status", "title"), [(404, "Not Found"), (409, "Conflict"), (422, "Unprocessable Content")])
def test_service_rejections_are_problem_documents(client, service, status, title):
    loc = ("body", "priorityClassName") if status == 422 else None
    service.result = Rejected(Rejection(status, "Reason", "workload team-a/train-7 exists", loc))
    response = client.post(WL_URL, json=WORKLOAD)
    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = {"type": f"https://gangplank.dev/problems/{title.lower().replace(' ', '-')}", "title": title,
               "status": status, "detail": "workload team-a/train-7 exists"}
    if loc:
        problem["errors"] = [{"loc": ["body", "priorityClassName"], "msg": "Workload team-a/train-7 exists"}]
    assert response.json() == problem


def test_a_reused_key_is_a_409_problem(client, service):
    service.result = KeyReused("another")
    answer = client.post(WL_URL, json=WORKLOAD, headers={"Idempotency-Key": "k"}).json()
    assert answer == {"type": "https://gangplank.dev/problems/idempotency-key-reused", "status": 409,
                      "title": "Idempotency key reused",
                      "detail": "this Idempotency-Key was used for a different request"}


def test_a_bare_stored_rejection_is_completed(client, service):
    service.result = Replayed(409, {"detail": "exists"})
    answer = client.post(WL_URL, json=WORKLOAD).json()
    assert answer["status"] == 409 and answer["title"] == "Conflict" and answer["type"].startswith("https://")
