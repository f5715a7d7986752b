"""The bodies of a job's life in shape (lifecycle.md): `scale`, over HTTP's validation and the Kafka
envelope, each bad field named."""
from __future__ import annotations

import pytest

from service.app.commands import Command
from service.schemas import InputValidationError, validate_body, validate_command, validate_envelope
from tests.api.test_schemas import envelope, schema_validator

GOOD = [
    {"podGroups": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 6}},
                    "pods": [{"name": "worker", "count": 6}]}]},
    {"compositePodGroups": [{"name": "serve", "count": 3}]},
    {"compositePodGroups": [{"name": "trainer", "schedulingPolicy": {"gang": {"minGroupCount": 5}},
                             "podGroups": [{"name": "workers", "count": 4}]}]},
    {"podGroups": [{"name": "w", "pods": [{"name": "p"}]}]},
]


@pytest.mark.parametrize("body", GOOD)
def test_the_spec_examples_are_valid(body):
    assert validate_body("Scale", body) == body
    schema_validator("Scale").validate(body)


@pytest.mark.parametrize(("body", "loc"), [
    ({}, ["body", "podGroups"]),
    ({"podGroups": []}, ["body", "podGroups"]),
    ({"podGroups": [{"pods": [{"name": "p", "count": 2}]}]}, ["body", "podGroups", 0, "name"]),
    ({"podGroups": [{"name": "w", "count": 2}]}, ["body", "podGroups", 0, "count"]),  # only inside a tree
    ({"podGroups": [{"name": "w", "topology": {"key": "k"}}]}, ["body", "podGroups", 0, "topology"]),
    ({"podGroups": [{"name": "w", "pods": [{"name": "p", "count": 0}]}]}, ["body", "podGroups", 0, "pods", 0, "count"]),
    ({"podGroups": [{"name": "w", "pods": [{"name": "p", "count": 10_001}]}]},
     ["body", "podGroups", 0, "pods", 0, "count"]),
    ({"podGroups": [{"name": "w", "pods": [{"name": "p", "count": "2"}]}]},
     ["body", "podGroups", 0, "pods", 0, "count"]),
    ({"podGroups": [{"name": "w", "pods": [{"name": "p", "requests": {"cpu": "1"}}]}]},
     ["body", "podGroups", 0, "pods", 0, "requests"]),
    ({"podGroups": [{"name": "w", "schedulingPolicy": {"basic": {}}}]},
     ["body", "podGroups", 0, "schedulingPolicy", "basic"]),
    ({"podGroups": [{"name": "w", "schedulingPolicy": {"gang": {"minGroupCount": 2}}}]},
     ["body", "podGroups", 0, "schedulingPolicy", "gang", "minGroupCount"]),
    ({"podGroups": [{"name": "w", "schedulingPolicy": {"gang": {"minCount": 0}}}]},
     ["body", "podGroups", 0, "schedulingPolicy", "gang", "minCount"]),
    ({"podGroups": [{"name": "w"}, {"name": "w"}]}, ["body", "podGroups", 1, "name"]),
    ({"podGroups": [{"name": "w", "pods": [{"name": "p"}, {"name": "p"}]}]}, ["body", "podGroups", 0, "pods", 1, "name"]),
    ({"compositePodGroups": [{"name": "s", "count": 65}]}, ["body", "compositePodGroups", 0, "count"]),
    ({"compositePodGroups": [{"name": "s", "schedulingPolicy": {"gang": {"minCount": 2}}}]},
     ["body", "compositePodGroups", 0, "schedulingPolicy", "gang", "minCount"]),
    ({"compositePodGroups": [{"name": "s", "podGroups": [{"name": "g", "count": 0}]}]},
     ["body", "compositePodGroups", 0, "podGroups", 0, "count"]),
    ({"compositePodGroups": [{"name": "s", "compositePodGroups": [{"name": "c"}, {"name": "c"}]}]},
     ["body", "compositePodGroups", 0, "compositePodGroups", 1, "name"]),
    ({"compositePodGroups": [{"name": "S"}]}, ["body", "compositePodGroups", 0, "name"]),
    ({"podGroups": None}, ["body", "podGroups"]),
])
def test_a_bad_scale_body_names_each_field(body, loc):
    with pytest.raises(InputValidationError) as bad:
        validate_body("Scale", body)
    assert loc in [e["loc"] for e in bad.value.errors], bad.value.errors
    assert not schema_validator("Scale").is_valid(body) or loc == ["body", "podGroups"] or "name" in loc


def test_scale_workload_is_a_kafka_command_with_the_http_body():
    body = GOOD[0]
    command = validate_command(envelope(type="ScaleWorkload", name="train", body=body))
    assert command == Command(cluster="prod", type="ScaleWorkload", name="train", namespace="team-a", body=body)
    with pytest.raises(InputValidationError) as bad:
        validate_envelope(envelope(type="ScaleWorkload", name="train", body={"podGroups": [{"name": "w", "x": 1}]}))
    assert ["body", "podGroups", 0, "x"] in [e["loc"] for e in bad.value.errors]
    schema_validator("CommandEnvelope").validate(envelope(type="ScaleWorkload", name="train", body=body))
    assert not schema_validator("CommandEnvelope").is_valid(envelope(type="ScaleWorkload", name="train", body={}))
