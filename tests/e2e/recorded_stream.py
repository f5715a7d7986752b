"""A recorded HTTP request stream: the requests, and the answers a server gave them, byte for byte.

`requests()` is a fixed stream of ~400 requests on one cluster (inventory, keyed and unkeyed
submissions, retries, reused keys, dry runs, preemption, deletions, finished pods, every kind of
refusal: 404, 409, 413, 415, 422 with several errors, malformed JSON) and reads of the views
between them. `replay(client)` sends them in order and returns each answer as its status, the
headers that matter and the body text. tests/e2e/recorded/http_stream.json holds the answers
a server gave (first recorded on main before the HTTP path was made faster, and the faster path
answered the same bytes); tests/e2e/test_recorded_stream.py replays the stream against today's
server on PostgreSQL and SQLite and compares byte for byte. Record it again only for a change
that means to change answers, such as a new rules version (the recording names its version),
and say so:

    .venv/bin/python -m tests.e2e.recorded_stream --write
"""
from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

CLUSTER = "recorded"
RECORDING = Path(__file__).with_name("recorded") / "http_stream.json"
# the answer headers that are part of the contract (Content-Length follows from the body)
HEADERS = ("content-type", "content-length", "location", "idempotent-replayed", "retry-after",
           "www-authenticate", "allow")
# answers that carry the clock (recordedAt, receivedAt, the hash chain) are not in the stream:
# /events, /history, /audit/verify


def _node(cpu: str, gpu: int, rack: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"labels": {"example.com/rack": rack, "topology.kubernetes.io/zone": f"z-{rack}"},
                            "allocatable": {"cpu": cpu, "memory": "256Gi", "example.com/gpu": str(gpu),
                                            "pods": "110"}}
    body.update(extra)
    return body


def _gang(name: str, pods: int, *, gpu: int = 1, cpu: str = "2", min_count: int | None = None,
          priority: int | None = None, topology: bool = True, **extra: Any) -> dict[str, Any]:
    group: dict[str, Any] = {"name": "workers", "schedulingPolicy": {"gang": {"minCount": min_count or pods}},
                             "pods": [{"name": "w", "count": pods,
                                       "requests": {"cpu": cpu, "memory": "8Gi", "example.com/gpu": str(gpu)}}]}
    if topology:
        group["topology"] = {"key": "example.com/rack"}
    body: dict[str, Any] = {"name": name, "podGroups": [group]}
    if priority is not None:
        body["priority"] = priority
    body.update(extra)
    return body


Request = dict[str, Any]  # {"method", "path", "body" (text) | None, "headers": {...}}


def _req(method: str, path: str, body: Any = None, **headers: str) -> Request:
    text = body if isinstance(body, str) or body is None else json.dumps(body, separators=(",", ":"))
    if body is not None and "Content-Type" not in headers:
        headers = {"Content-Type": "application/json", **headers}
    return {"method": method, "path": f"/v1/clusters/{CLUSTER}{path}", "body": text, "headers": headers}


def _fixed() -> list[Request]:
    """The hand-written part: every kind of answer of the submission path."""
    ws = "/namespaces/team-a/workloads"
    out = [_req("PUT", f"/nodes/n{i}", _node("32", 8, f"r{i % 3}")) for i in range(6)]
    out += [
        _req("PUT", "/nodes/tainted", _node("32", 8, "r9", taints=[{"key": "gpu", "value": "a100",
                                                                   "effect": "NoSchedule"}])),
        _req("PUT", "/priorityclasses/high", {"value": 1000}),
        _req("GET", "/nodes"),
        _req("POST", ws, _gang("train", 8), **{"Idempotency-Key": "k-train"}),
        _req("POST", ws, _gang("train", 8), **{"Idempotency-Key": "k-train"}),  # a retry: the same answer
        _req("POST", ws, _gang("other", 2), **{"Idempotency-Key": "k-train"}),  # the key reused: 409
        _req("POST", ws, _gang("train", 8)),  # the name is live: 409
        _req("POST", ws + "?dryRun=true", _gang("dry", 4)),
        _req("POST", ws + "?dryRun=All", _gang("dry", 4), **{"Idempotency-Key": "k-dry"}),
        _req("POST", ws + "?dryRun=maybe", _gang("dry", 4)),
        _req("POST", ws, _gang("big", 40)),  # pending: no room for a 40-GPU gang in one rack
        _req("POST", ws, _gang("loose", 12, topology=False, min_count=6, priority=10)),
        _req("POST", ws, _gang("urgent", 16, topology=False, priorityClassName="high"),
             **{"Idempotency-Key": "k-urgent"}),  # preempts
        _req("POST", ws, _gang("urgent", 16, topology=False, priorityClassName="high"),
             **{"Idempotency-Key": "k-urgent"}),
        _req("GET", ws + "/train"),
        _req("GET", ws + "/loose"),
        _req("GET", "/workloads?limit=2"),
        _req("GET", "/workloads?namespace=team-a&phase=Pending"),
        _req("POST", "/namespaces/team-a/workloads/train/podstatus",
             {"pods": [{"podGroup": "workers", "name": "w-0", "phase": "Succeeded"}]}, **{"Idempotency-Key": "k-f"}),
        _req("POST", "/namespaces/team-a/workloads/train/podstatus",
             {"pods": [{"podGroup": "workers", "name": "w-0", "phase": "Succeeded"}]}, **{"Idempotency-Key": "k-f"}),
        _req("POST", "/namespaces/team-a/workloads/train/podstatus",
             {"pods": [{"podGroup": "nope", "name": "w-1", "phase": "Failed"}]}),
        _req("POST", "/namespaces/team-a/workloads/train/podstatus",
             {"pods": [{"podGroup": "workers", "name": "w-1", "phase": "Running"}]}),
        _req("DELETE", ws + "/train", **{"Idempotency-Key": "k-del-train"}),
        _req("DELETE", ws + "/train", **{"Idempotency-Key": "k-del-train"}),
        _req("DELETE", ws + "/train"),
        _req("DELETE", ws + "/never"),
        _req("GET", ws + "/train"),
        _req("GET", ws + "/never"),
        # refusals: nothing recorded
        _req("POST", ws, "{\"name\": \"bad\", "),
        _req("POST", ws, "{\"name\": \"a\", \"name\": \"b\", \"podGroups\": []}"),
        _req("POST", ws, "[1, 2]"),
        _req("POST", ws, ""),
        _req("POST", ws, "{\"name\": \"x\", \"podGroups\": [{\"name\": \"g\"}]}", **{"Content-Type": "text/plain"}),
        _req("POST", ws, _gang("ok-charset", 1), **{"Content-Type": "application/json; charset=utf-8"}),
        _req("POST", ws, _gang("merge", 1), **{"Content-Type": "application/merge-patch+json"}),
        _req("POST", ws, {"name": "Bad_Name", "priority": "high", "extra": 1,
                          "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 5}},
                                         "pods": [{"name": "p", "count": 2, "requests": {"cpu": "lots"}}]}]}),
        _req("POST", ws, _gang("toomany", 10_001, topology=False)),
        _req("POST", ws, _gang("ns-mismatch", 1, namespace="team-b")),
        _req("POST", ws, _gang("badkey", 1), **{"Idempotency-Key": "has space\tand tab"}),
        _req("POST", ws, "{\"name\": \"huge\", \"pad\": \"" + "x" * (1 << 20) + "\"}"),
        _req("POST", "/namespaces/Team_A/workloads", _gang("badns", 1)),
        _req("POST", ws, "{\"name\": \"nan\", \"priority\": NaN, \"podGroups\": []}"),
        _req("PUT", "/nodes/bad", {"allocatable": {"cpu": "-1"}, "labels": {"a": 1}}),
        _req("PUT", "/nodes/n0", {"name": "other", "allocatable": {"cpu": "1"}}),
        _req("DELETE", "/nodes/none"),
        _req("GET", "/scheduler"),
    ]
    return out


def _random(count: int, seed: int) -> list[Request]:
    """A seeded run of keyed submissions of 1-16 pods, retries, dry runs and deletions."""
    rng = random.Random(seed)
    ws = "/namespaces/team-b/workloads"
    live: list[str] = []
    out: list[Request] = []
    for i in range(count):
        name = f"job-{i:03d}"
        body = _gang(name, rng.randint(1, 16), cpu=rng.choice(["1", "2", "4"]),
                     priority=rng.choice([10, 50, 100, 500]), topology=rng.random() < 0.7)
        roll = rng.random()
        if roll < 0.1:
            out.append(_req("POST", ws + "?dryRun=true", body))
            continue
        key = {"Idempotency-Key": f"r-{i}"} if roll < 0.8 else {}
        out.append(_req("POST", ws, body, **key))
        live.append(name)
        if key and rng.random() < 0.15:
            out.append(_req("POST", ws, body, **key))
        if rng.random() < 0.1:
            out.append(_req("GET", f"{ws}/{rng.choice(live)}"))
        while len(live) > 12 or (live and rng.random() < 0.25):
            gone = live.pop(rng.randrange(len(live)))
            out.append(_req("DELETE", f"{ws}/{gone}", **({"Idempotency-Key": f"d-{gone}"} if key else {})))
    out.append(_req("GET", "/workloads?limit=1000"))
    out.append(_req("GET", "/nodes"))
    out.append(_req("GET", "/state"))
    return out


def requests() -> list[Request]:
    return _fixed() + _random(300, seed=36)


def requests_digest() -> str:
    """sha256 of the stream's requests: the recording belongs to exactly these."""
    text = json.dumps(requests(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def answer_of(status: int, headers: Any, body: bytes) -> dict[str, Any]:
    kept = {name: headers[name] for name in HEADERS if name in headers}
    return {"status": status, "headers": kept, "body": body.decode("utf-8")}


def replay(client: Any) -> list[dict[str, Any]]:
    """Every request of the stream through `client` (a litestar TestClient), in order."""
    answers = []
    for r in requests():
        content = None if r["body"] is None else r["body"].encode("utf-8")
        response = client.request(r["method"], r["path"], content=content, headers=r["headers"])
        answers.append(answer_of(response.status_code, response.headers, response.content))
    return answers


def main() -> None:
    import tempfile

    from litestar.testing import TestClient

    from service.bootstrap import build_app
    from service.config import Settings

    if "--write" not in sys.argv:
        raise SystemExit("usage: python -m tests.e2e.recorded_stream --write")
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{tmp}/recorded.db"
        with TestClient(build_app(Settings(database_url=url))) as client:  # type: ignore[arg-type]
            answers = replay(client)
    RECORDING.parent.mkdir(exist_ok=True)
    from service.domain.model.rules import RULES
    document = {"requests_sha256": requests_digest(), "rules": RULES, "answers": answers}
    RECORDING.write_text(json.dumps(document, indent=0, ensure_ascii=True) + "\n")
    print(f"{len(answers)} answers written to {RECORDING}")


if __name__ == "__main__":
    main()
