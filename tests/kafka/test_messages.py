"""Parsing, fingerprints, dead letters, batching and the AsyncAPI schemas: no broker needed."""
from __future__ import annotations

import json

import jsonschema
import pytest
from aiokafka.structs import ConsumerRecord

from service.contracts import GENERATORS
from service.kafka.consumer import Dead, Run, plan
from service.kafka.messages import (
    FINGERPRINT_PREFIX,
    KEY_REUSED,
    KEY_TAKEN_BY_HTTP,
    MAX_ERROR_HEADER,
    Malformed,
    Parsed,
    command_fingerprint,
    dead_letter,
    key_conflict_error,
    parse_record,
)
from service.store.base import StoredEvent
from tests.kafka.conftest import command, node_body, workload_body


def record(offset: int, value: dict | bytes | None, key: bytes | None = b"c") -> ConsumerRecord:
    raw = value if value is None or isinstance(value, bytes) else json.dumps(value).encode()
    return ConsumerRecord(topic="t", partition=0, offset=offset, timestamp=0, timestamp_type=0, key=key, value=raw,
                          checksum=None, serialized_key_size=1, serialized_value_size=len(raw or b""), headers=())


def test_a_valid_message_becomes_a_batch_item_keyed_by_its_id():
    m = command("prod", "SubmitWorkload", "train", namespace="team-a", body=workload_body("train"), id="abc")
    parsed = parse_record(json.dumps(m).encode(), topic="cmds")
    assert isinstance(parsed, Parsed)
    assert parsed.key == "abc" and parsed.cluster == "prod"
    item = parsed.item
    assert item.idempotency_key == "abc" and item.origin.source == "kafka" and item.origin.command_id == "abc"
    assert item.command.type == "SubmitWorkload" and item.command.namespace == "team-a"
    assert item.fingerprint and item.fingerprint.startswith(FINGERPRINT_PREFIX)


def test_the_fingerprint_is_the_canonical_command_whatever_the_bytes():
    m = command("prod", "UpsertNode", "n1", body=node_body(), id="k")
    a = parse_record(json.dumps(m).encode(), topic="t")
    b = parse_record(json.dumps(m, indent=3, sort_keys=True).encode(), topic="t")
    c = parse_record(json.dumps({**m, "body": node_body(cpu="9")}).encode(), topic="t")
    assert isinstance(a, Parsed) and isinstance(b, Parsed) and isinstance(c, Parsed)
    assert a.item.fingerprint == b.item.fingerprint == command_fingerprint(a.item.command)
    assert a.item.fingerprint != c.item.fingerprint
    d = parse_record(json.dumps({**m, "id": "other"}).encode(), topic="t")
    assert isinstance(d, Parsed) and d.item.fingerprint == a.item.fingerprint  # the id is the key, not the command


@pytest.mark.parametrize("raw, start", [
    (b"", "(root): Invalid JSON: empty body"),
    (b"\xff\xfe", "(root): Invalid JSON: not UTF-8"),
    (b"[1, 2]", "(root): A command message must be a JSON object"),
    (b'{"id": "a", "id": "b"}', "(root): Invalid JSON: duplicate key"),
    (None, "(root): empty message"),
])
def test_malformed_messages_say_why(raw, start):
    parsed = parse_record(raw, topic="t")
    assert isinstance(parsed, Malformed) and parsed.error.startswith(start)


def test_a_dead_letter_keeps_the_bytes_and_carries_four_headers():
    letter = dead_letter("dlq", key=b"k", value=b"\x00raw", error="x" * 10_000, topic="cmds", partition=3, offset=42)
    assert letter.topic == "dlq" and letter.key == b"k" and letter.value == b"\x00raw"
    headers = dict(letter.headers)
    assert list(headers) == ["error", "source-topic", "source-partition", "source-offset"]
    assert headers["source-topic"] == b"cmds" and headers["source-partition"] == b"3"
    assert headers["source-offset"] == b"42"
    assert len(headers["error"].decode()) == MAX_ERROR_HEADER
    assert dead_letter("dlq", key=None, value=None, error="e", topic="t", partition=0, offset=0).value == b""


def test_a_key_conflict_names_an_http_key():
    assert key_conflict_error(FINGERPRINT_PREFIX + "00") == KEY_REUSED
    assert key_conflict_error("0" * 64) == KEY_TAKEN_BY_HTTP


def test_plan_cuts_runs_by_cluster_malformed_repeated_id_and_size():
    a1 = command("a", "UpsertNode", "n1", body=node_body(), id="1")
    a2 = command("a", "UpsertNode", "n2", body=node_body(), id="2")
    b1 = command("b", "UpsertNode", "n1", body=node_body(), id="3")
    records = [record(10, a1), record(11, a2), record(12, b"junk"), record(13, a1), record(14, b1),
               record(15, a1), record(16, a1)]  # id "1" twice in a row: a new run at 16
    units = plan(records, topic="t", max_run=500)
    shape = [(u.cluster, [r.offset for r in u.records]) if isinstance(u, Run) else ("dead", [u.record.offset])
             for u in units]
    assert shape == [("a", [10, 11]), ("dead", [12]), ("a", [13]), ("b", [14]), ("a", [15]), ("a", [16])]
    many = [record(i, command("a", "UpsertNode", f"n{i}", body=node_body())) for i in range(7)]
    assert [len(u.records) for u in plan(many, topic="t", max_run=3)] == [3, 3, 1]
    assert isinstance(plan([record(0, b"{}")], topic="t", max_run=3)[0], Dead)


@pytest.fixture(scope="module")
def asyncapi() -> dict:
    return GENERATORS["asyncapi.json"]()


def _validator(document: dict, schema: str) -> jsonschema.Validator:
    root = {"$ref": f"#/components/schemas/{schema}", "components": document["components"]}
    return jsonschema.Draft202012Validator(root)


def test_asyncapi_document_describes_the_three_topics(asyncapi):
    assert asyncapi["asyncapi"] == "3.0.0"
    addresses = {c["address"] for c in asyncapi["channels"].values()}
    assert addresses == {"gangplank.commands", "gangplank.commands.dlq", "gangplank.decisions"}
    for operation in asyncapi["operations"].values():
        channel = operation["channel"]["$ref"].split("/")[-1]
        for message in operation["messages"]:
            assert message["$ref"].startswith(f"#/channels/{channel}/messages/")
    text = json.dumps(asyncapi)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "')[1:]}:
        node = asyncapi
        for step in ref.lstrip("#/").split("/"):
            node = node[step]  # every reference resolves inside the document


def test_asyncapi_schemas_accept_real_messages_and_refuse_bad_ones(asyncapi):
    commands = _validator(asyncapi, "CommandEnvelope")
    good = command("prod", "SubmitWorkload", "train", namespace="team-a", body=workload_body("train"))
    commands.validate(good)
    commands.validate(command("prod", "UpsertNode", "n1.example", body=node_body()))
    assert not commands.is_valid({**good, "type": "LaunchRocket"})
    assert not commands.is_valid({k: v for k, v in good.items() if k != "namespace"})
    assert not commands.is_valid({**good, "body": {**good["body"], "podGroups": "nope"}})
    events = _validator(asyncapi, "EventEnvelope")
    stored = StoredEvent("prod", 2, "PodGroupScheduled", 1, {"workload": "w"},
                         {"commandId": "abc", "source": "kafka", "actor": "kafka:t", "causationPosition": 1,
                          "receivedAt": "2026-11-30T10:00:00.000000Z"},
                         "2026-11-30T10:00:00.001234Z", "0" * 64, "a" * 64)
    events.validate(stored.envelope())
    assert not events.is_valid({**stored.envelope(), "position": 0})
    headers = _validator(asyncapi, "DeadLetterHeaders")
    letter = dead_letter("dlq", key=None, value=b"x", error="bad", topic="t", partition=1, offset=7)
    headers.validate({k: v.decode() for k, v in letter.headers})


def test_a_command_over_the_http_body_limit_is_malformed():
    from service.kafka.messages import MAX_COMMAND_BYTES

    body = node_body()
    body["labels"] = {f"example.com/k{i}": "v" * 60 for i in range(20_000)}  # ~1.6 MB of valid labels
    raw = json.dumps(command("prod", "UpsertNode", "n1", body=body, id="big")).encode()
    assert len(raw) > MAX_COMMAND_BYTES
    parsed = parse_record(raw, topic="t")
    assert isinstance(parsed, Malformed) and "at most" in parsed.error
    small = json.dumps(command("prod", "UpsertNode", "n1", body=node_body(), id="ok")).encode()
    assert isinstance(parse_record(small, topic="t"), Parsed)
