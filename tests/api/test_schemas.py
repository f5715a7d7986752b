"""service.schemas without HTTP: validate_body on dicts, the Kafka envelope, the JSON Schemas."""
from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from service.app.commands import Command
from service.schemas import InputValidationError, json_schemas, validate_body, validate_command, validate_envelope
from tests.api.conftest import DEVICE_CLASS, NODE, PRIORITY_CLASS, RESOURCE_SLICE, WORKLOAD, body

SAMPLES = {"Node": NODE, "DeviceClass": DEVICE_CLASS, "ResourceSlice": RESOURCE_SLICE,
           "PriorityClass": PRIORITY_CLASS, "Workload": WORKLOAD}


@pytest.mark.parametrize("kind", SAMPLES)
def test_valid_bodies_come_back_as_sent(kind):
    sample = SAMPLES[kind]
    assert validate_body(kind, sample) == sample
    assert validate_body(kind, json.dumps(sample).encode()) == sample


def test_errors_carry_loc_and_msg():
    with pytest.raises(InputValidationError) as failure:
        validate_body("Node", {"allocatable": {"cpu": "1.5m"}, "labels": {"a": 2}})
    assert failure.value.errors == [
        {"loc": ["body", "labels", "a"], "msg": "Input should be a valid string"},
        {"loc": ["body", "allocatable", "cpu"], "msg": "'1.5m' is not representable in millicores of cpu"},
    ]
    assert "body.allocatable.cpu" in str(failure.value)
    assert failure.value.problem()["status"] == 422


def test_quantities_as_integers_and_strings():
    assert validate_body("Node", {"allocatable": {"cpu": 4, "memory": "1Gi", "pods": 110, "example.com/gpu": "8"}})
    with pytest.raises(InputValidationError):
        validate_body("Node", {"allocatable": {"cpu": 1.0}})


def test_priority_bounds():
    for priority in (-2147483648, 0, 1_000_000_000):
        assert validate_body("Workload", {**WORKLOAD, "priority": priority})["priority"] == priority
    assert validate_body("Workload", {**{k: v for k, v in WORKLOAD.items() if k != "priority"},
                                      "priorityClassName": "high.prio"})


def test_version_and_bool_attributes():
    doc = body(RESOURCE_SLICE)
    doc["devices"][0]["attributes"].update({"fw": {"version": "1.2.3-rc.1+build.5"}, "gpu.example.com/ok": {"bool": True}})
    assert validate_body("ResourceSlice", doc) == doc


def test_label_rules():
    good = {"a": "", "example.com/x": "A-b_c.d", "k" * 63: "v" * 63, f"{'d' * 60}.example.com/name": "x"}
    assert validate_body("Node", {"labels": good})["labels"] == good
    for key in ["", "/x", "x/", "k" * 64, "a/b/c", "-a", "Example.com/x", "a b"]:
        with pytest.raises(InputValidationError):
            validate_body("Node", {"labels": {key: "v"}})
    for value in ["-v", "v" * 64, "a b", "é"]:
        with pytest.raises(InputValidationError):
            validate_body("Node", {"labels": {"k": value}})


# -- the Kafka envelope -----------------------------------------------------------------------------

def envelope(**fields):
    message = {"id": "0f8e2a9c-6d1b-4c1e-9a7e-3b2f1d0c9e8a", "cluster": "prod", "type": "SubmitWorkload",
               "namespace": "team-a", "name": "train-7", "body": WORKLOAD}
    message.update(fields)
    return {k: v for k, v in message.items() if v is not None}


def test_a_valid_message_is_a_command():
    message = validate_envelope(json.dumps(envelope()).encode())
    assert message.id == "0f8e2a9c-6d1b-4c1e-9a7e-3b2f1d0c9e8a"
    assert message.command == Command(cluster="prod", type="SubmitWorkload", name="train-7", namespace="team-a",
                                      body=WORKLOAD)
    assert validate_command(envelope(type="RemoveNode", namespace=None, body=None, name="n1")) == \
        Command(cluster="prod", type="RemoveNode", name="n1")
    upsert = validate_command(envelope(type="UpsertNode", namespace=None, name="n1", body={**NODE, "name": "n1"}))
    assert upsert.body == NODE


@pytest.mark.parametrize(("message", "loc"), [
    (envelope(id=""), ["id"]),
    (envelope(id="x" * 256), ["id"]),
    (envelope(id="caf\u00e9"), ["id"]),
    (envelope(id=7), ["id"]),
    (envelope(cluster="Prod"), ["cluster"]),
    (envelope(type="PatchWorkload"), ["type"]),
    (envelope(namespace=None), ["namespace"]),
    (envelope(type="RemoveNode", body=None, name="n1"), ["namespace"]),
    (envelope(type="DeleteWorkload"), ["body"]),
    (envelope(type="UpsertNode", namespace=None, body=None, name="n1"), ["body"]),
    (envelope(type="UpsertNode", namespace=None, name="N1", body=NODE), ["name"]),
    (envelope(name="a.b"), ["name"]),
    (envelope(name="train-8"), ["body", "name"]),
    (envelope(body={**WORKLOAD, "priority": "high"}), ["body", "priority"]),
    (envelope(extra=1), ["extra"]),
    (envelope(type="UpsertNode", namespace=None, name="n1", body={**NODE, "name": "n2"}), ["body", "name"]),
])
def test_a_bad_message_names_its_fields(message, loc):
    with pytest.raises(InputValidationError) as failure:
        validate_envelope(message)
    assert loc in [e["loc"] for e in failure.value.errors]
    assert str(failure.value)  # the DLQ `error` header


@pytest.mark.parametrize("raw", [b"", b"not json", b"[]", b"\xff", b'{"id": "a", "id": "b"}'])
def test_a_message_that_is_not_a_json_object(raw):
    with pytest.raises(InputValidationError) as failure:
        validate_envelope(raw)
    assert failure.value.errors[0]["loc"] == []


# -- the JSON Schemas agree with the models ---------------------------------------------------------

SCHEMAS = json_schemas()
REGISTRY = Registry().with_resources((f"{name}.json", Resource.from_contents(schema))
                                     for name, schema in SCHEMAS.items())


def schema_validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(SCHEMAS[name], registry=REGISTRY)


@pytest.mark.parametrize("name", SCHEMAS)
def test_schemas_are_valid_draft_2020_12(name):
    Draft202012Validator.check_schema(SCHEMAS[name])


@pytest.mark.parametrize("kind", SAMPLES)
def test_samples_follow_their_schema(kind):
    schema_validator(kind).validate(SAMPLES[kind])


@pytest.mark.parametrize(("kind", "bad"), [
    ("Node", {"labels": {"a b": "x"}}),
    ("Node", {"allocatable": {"cpu": "1 core"}}),
    ("Node", {"unschedulable": "no"}),
    ("Node", {"taints": [{"key": "a", "effect": "NoEntry"}]}),
    ("Node", {"providerID": "x"}),
    ("Workload", {**WORKLOAD, "podGroups": [{**WORKLOAD["podGroups"][0], "pods": [
        {"name": "p", "tolerations": [{"key": "a", "operator": "Exists", "tolerationSeconds": 1}]}]}]}),
    ("Workload", {**WORKLOAD, "podGroups": [{**WORKLOAD["podGroups"][0], "pods": [
        {"name": "p", "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Near"}]}]}}}}]}]}),
    ("PriorityClass", {"value": 2_000_000_000}),
    ("Workload", {**WORKLOAD, "podGroups": []}),
    ("Workload", {**WORKLOAD, "name": "Train"}),
    ("ResourceSlice", {**RESOURCE_SLICE, "devices": [{"name": "d", "attributes": {"a": {"float": 1.0}}}]}),
])
def test_schemas_reject_what_the_models_reject(kind, bad):
    assert not schema_validator(kind).is_valid(bad)
    with pytest.raises(InputValidationError):
        validate_body(kind, bad)


def test_envelope_schema_dispatches_on_type():
    validator = schema_validator("CommandEnvelope")
    validator.validate(envelope())
    validator.validate(envelope(type="RemoveNode", namespace=None, body=None, name="n1.example"))
    assert not validator.is_valid(envelope(type="RemoveNode", name="n1"))  # namespace not allowed
    assert not validator.is_valid(envelope(namespace=None))  # namespace required
    assert not validator.is_valid(envelope(body={"name": "x"}))  # the Workload schema applies
    assert not validator.is_valid(envelope(type="DeleteWorkload"))  # no body for a delete


def test_finish_pods_is_a_kafka_command_with_the_http_body():
    body = {"pods": [{"podGroup": "job", "name": "pi-0", "phase": "Succeeded"}]}
    command = validate_command(envelope(type="FinishPods", name="pi", body=body))
    assert command == Command(cluster="prod", type="FinishPods", name="pi", namespace="team-a", body=body)
    with pytest.raises(InputValidationError) as bad:
        validate_envelope(envelope(type="FinishPods", name="pi", body={"pods": [{**body["pods"][0], "phase": "Done"}]}))
    assert ["body", "pods", 0, "phase"] in [e["loc"] for e in bad.value.errors]
    with pytest.raises(InputValidationError):
        validate_envelope(envelope(type="FinishPods", name="pi", namespace=None, body=body))
    validator = schema_validator("CommandEnvelope")
    validator.validate(envelope(type="FinishPods", name="pi", body=body))
    assert not validator.is_valid(envelope(type="FinishPods", name="pi", body={"pods": []}))
