"""The OpenAPI document is complete for the newer routes (podstatus, replay, what-if, checkpoints,
/scheduler): each declares every status it answers, its body's schema (the what-if changes too), and
answers that its response schemas allow; query positions are bounded integers; `OPTIONS` names every
method of a path. Real answers of an application over the in-memory store are checked against the
document, so a status or a value that the document does not allow fails here."""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from litestar.testing import TestClient

from service.api import ApiSettings, create_app
from service.app.service import Gangplank
from service.schemas.errors import InputValidationError
from service.schemas.whatif import parse_changes
from service.store import open_store
from service.store.memory import discard_database
from tests.api.test_openapi import _check

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts"
C, T = "/v1/clusters/prod", "/v1/clusters/{cluster}"
WL = f"{T}/namespaces/{{namespace}}/workloads/{{name}}"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    with TestClient(create_app(Gangplank.__new__(Gangplank), ApiSettings())) as client:
        doc: dict[str, Any] = client.get("/schema/openapi.json").json()
    return doc


@pytest.fixture
def real() -> Iterator[TestClient]:
    name = f"openapi-routes-{uuid.uuid4().hex}"
    with TestClient(create_app(Gangplank(open_store(f"memory://{name}")), ApiSettings())) as client:
        yield client
    discard_database(name)


STATUSES = {
    ("post", f"{WL}/podstatus"): {"200", "404", "409", "413", "415", "422"},
    ("get", f"{T}/audit/replay"): {"200", "404", "409", "422"},
    ("post", f"{T}/audit/what-if"): {"200", "404", "413", "415", "422"},
    ("get", f"{T}/audit/checkpoints"): {"200", "422"},
    ("get", f"{T}/scheduler"): {"200", "422"},
    ("put", f"{T}/scheduler"): {"200", "409", "413", "415", "422"},
}


@pytest.mark.parametrize(("method", "path"), sorted(STATUSES))
def test_every_status_of_the_newer_routes_is_declared(document, method, path):
    assert set(document["paths"][path][method]["responses"]) == STATUSES[method, path]


def test_a_named_workload_command_declares_404_like_podstatus(document):
    """A command to a named workload (podstatus, and scale once it is routed) answers 404 for an
    unknown one: every such route declares it."""
    commands = [(p, ops["post"]) for p, ops in document["paths"].items() if p.startswith(f"{WL}/") and "post" in ops]
    assert commands
    for path, operation in commands:
        assert "404" in operation["responses"], path


def test_the_what_if_body_is_described_and_records_nothing(document):
    operation = document["paths"][f"{T}/audit/what-if"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/WhatIfChanges"}
    assert not any(p["in"] == "header" for p in operation.get("parameters", ()))  # no Idempotency-Key
    assert "headers" not in operation["responses"]["200"]
    contract = json.loads((CONTRACTS / "schemas" / "WhatIfChanges.json").read_text())
    assert set(contract["properties"]) == {"from", "until", "scoring", "priorityClasses", "nodes", "capacity",
                                           "withdraw"}


def _schema_errors(document: dict[str, Any], name: str, value: Any) -> list[str]:
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return [e.message for e in Draft202012Validator(schema).iter_errors(value)]


# documents the parser takes (against an empty stream, which only the range and names depend on)
ACCEPTED = [
    {},
    {"from": 0, "until": 5},
    {"scoring": {"strategy": "LeastAllocated"}},
    {"priorityClasses": {"batch": 1000, "low": -5}},
    {"nodes": [{"at": 1, "remove": "n1"}, {"at": 2, "cordon": "n2"}, {"at": 3, "uncordon": "n2"}]},
    {"nodes": [{"at": 1, "add": "n4", "node": {"allocatable": {"cpu": "4"}, "labels": {"r": "a"}}}]},
    {"capacity": [{"resource": "cpu", "factor": 2}, {"resource": "example.com/gpu", "factor": "0.5",
                                                     "nodeSelector": {"r": "a"}}]},
    {"withdraw": ["team-a/train-7"]},
]
REFUSED = [
    {"bogus": 1},
    {"from": -1},
    {"until": "5"},
    {"scoring": {"strategy": "Nope"}},
    {"scoring": {"strategy": "LeastAllocated", "extra": 1}},
    {"scoring": {"strategy": "LeastAllocated", "fragmentationAware": {}}},
    {"priorityClasses": {"batch": "high"}},
    {"priorityClasses": {"batch": 2_000_000_000}},
    {"nodes": [{"at": 1}]},
    {"nodes": [{"at": 1, "remove": "n1", "cordon": "n1"}]},
    {"nodes": [{"at": 1, "add": "n1"}]},
    {"nodes": [{"at": 1, "remove": "n1", "node": {}}]},
    {"nodes": [{"at": -1, "remove": "n1"}]},
    {"nodes": [{"at": 1, "remove": ""}]},
    {"nodes": [{"at": 1, "cordon": "Not_A_Node"}]},
    {"nodes": [{"at": 1, "remove": "n1", "when": 2}]},
    {"capacity": [{"resource": "cpu", "factor": 0}]},
    {"capacity": [{"resource": "cpu", "factor": "0.0"}]},
    {"capacity": [{"resource": "cpu", "factor": "-1"}]},
    {"capacity": [{"resource": "cpu"}]},
    {"capacity": [{"resource": "cpu", "factor": 1, "nodeSelector": {"r": 1}}]},
    {"withdraw": ["no-slash"]},
    {"withdraw": "team-a/x"},
    [],
]


@pytest.mark.parametrize("changes", ACCEPTED, ids=lambda c: json.dumps(c)[:40])
def test_the_schema_allows_what_the_parser_takes(document, changes):
    parse_changes(changes)
    assert _schema_errors(document, "WhatIfChanges", changes) == []


@pytest.mark.parametrize("changes", REFUSED, ids=lambda c: json.dumps(c)[:40])
def test_the_schema_refuses_what_the_parser_refuses(document, changes):
    with pytest.raises(InputValidationError):
        parse_changes(changes)
    assert _schema_errors(document, "WhatIfChanges", changes) != []


def test_the_audit_docs_example_is_valid(document):
    """docs/audit.md's example of the changes document is the schema's own example, and valid."""
    schema = document["components"]["schemas"]["WhatIfChanges"]
    (example,) = schema["examples"]
    assert _schema_errors(document, "WhatIfChanges", example) == []
    parse_changes(example)
    docs = (Path(__file__).resolve().parents[2] / "docs" / "audit.md").read_text()
    block = docs.split("<!-- what-if changes example -->", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    assert json.loads(block) == example


def test_an_unknown_key_names_the_allowed_ones():
    with pytest.raises(InputValidationError) as caught:
        parse_changes({"nodse": [], "nodes": [{"at": 1, "remove": "n1", "when": 1}]})
    by_loc = {tuple(e["loc"]): e["msg"] for e in caught.value.errors}
    assert "from, until, scoring, priorityClasses, nodes, capacity, withdraw" in by_loc["nodse",]
    assert "at, remove, add, cordon, uncordon, node" in by_loc["nodes", 0, "when"]


def test_target_workload_is_one_of_shapes_and_from_history(document):
    def config(target: dict[str, Any]) -> dict[str, Any]:
        return {"scoringStrategy": {"type": "FragmentationAware", "fragmentationAware": {
            "deviceClassName": "gpu", "capacity": "memory", "targetWorkload": target}}}
    shapes = {"shapes": [{"weight": 1, "cpu": "1"}]}
    assert _schema_errors(document, "SchedulerConfiguration", config(shapes)) == []
    assert _schema_errors(document, "SchedulerConfiguration", config({"fromHistory": {}})) == []
    assert _schema_errors(document, "SchedulerConfiguration", config({})) != []
    assert _schema_errors(document, "SchedulerConfiguration", config({**shapes, "fromHistory": {}})) != []


@pytest.mark.parametrize(("path", "name"), [(f"{T}/audit/replay", "until"), (f"{T}/state", "at"),
                                            (f"{T}/events", "after"), (f"{T}/workloads", "after"),
                                            (f"{T}/namespaces/{{namespace}}/workloads", "after")])
def test_positions_are_bounded_integers(document, path, name):
    (parameter,) = [p for p in document["paths"][path]["get"]["parameters"] if p["name"] == name]
    schema = parameter["schema"]
    assert schema["type"] == "integer" and "oneOf" not in schema
    assert schema["minimum"] == 0 and type(schema["minimum"]) is int
    assert schema["maximum"] == 2**63 - 1 and type(schema["maximum"]) is int


def test_options_names_every_method_of_the_path(real, document):
    for path, operations in document["paths"].items():
        url = path.replace("{cluster}", "prod").replace("{namespace}", "team-a").replace("{name}", "x")
        answer = real.options(url)
        assert answer.status_code == 204, path
        assert answer.headers["allow"] == ", ".join(sorted({m.upper() for m in operations} | {"OPTIONS"})), path


# -- real answers ----------------------------------------------------------------------------------

def _record(real: TestClient) -> None:
    real.put(f"{C}/nodes/n1", json={"allocatable": {"cpu": "4", "pods": 10}})
    for name in ("done", "runs"):
        real.post(f"{C}/namespaces/team-a/workloads", json={
            "name": name, "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 1}},
                                         "pods": [{"name": "p", "requests": {"cpu": "1"}}]}]})


def test_real_answers_of_the_newer_routes_follow_the_document(real, document):
    what_if = f"{C}/audit/what-if"
    assert real.post(what_if, json={}).status_code == 404  # no events yet
    _check(document, "post", f"{T}/audit/what-if", real.post(what_if, json={}))
    _check(document, "get", f"{T}/audit/replay", real.get(f"{C}/audit/replay"))
    _record(real)
    podstatus, template = f"{C}/namespaces/team-a/workloads/done/podstatus", f"{WL}/podstatus"
    finished = {"pods": [{"podGroup": "g", "name": "p-0", "phase": "Succeeded"}]}
    calls = [
        ("post", template, podstatus, finished, 200),
        ("post", template, podstatus, finished, 409),  # not Running any more
        ("post", template, f"{C}/namespaces/team-a/workloads/never/podstatus", finished, 404),
        ("post", template, podstatus, {"pods": []}, 422),
        ("post", f"{T}/audit/what-if", what_if, {}, 200),
        ("post", f"{T}/audit/what-if", what_if, {"nodes": [{"at": 1, "remove": "gone"}]}, 422),
        ("get", f"{T}/audit/replay", f"{C}/audit/replay", None, 200),
        ("get", f"{T}/audit/replay", f"{C}/audit/replay?until=-1", None, 422),
        ("get", f"{T}/audit/checkpoints", f"{C}/audit/checkpoints", None, 200),
        ("get", f"{T}/scheduler", f"{C}/scheduler", None, 200),
        ("put", f"{T}/scheduler", f"{C}/scheduler", {"scoringStrategy": {"type": "LeastAllocated"}}, 200),
        ("put", f"{T}/scheduler", f"{C}/scheduler", {"scoringStrategy": {"type": "Nope"}}, 422),
        ("get", f"{T}/scheduler", f"{C}/scheduler", None, 200),
    ]
    for method, path, url, body, status in calls:
        answer = real.request(method.upper(), url, json=body)
        assert answer.status_code == status, (method, url, answer.text)
        _check(document, method, path, answer)
    report = real.post(what_if, json={}).json()
    assert {w["name"]: w["whatIf"]["phase"] for w in report["workloads"]}["done"] == "Completed"
    wrong_type = real.post(what_if, content=b"{}", headers={"Content-Type": "text/plain"})
    assert wrong_type.status_code == 415
    _check(document, "post", f"{T}/audit/what-if", wrong_type)


def test_what_if_errors_are_located_inside_the_body(real):
    _record(real)
    what_if = f"{C}/audit/what-if"
    malformed = real.post(what_if, content=b"{", headers={"Content-Type": "application/json"})
    assert malformed.status_code == 422 and [e["loc"] for e in malformed.json()["errors"]] == [["body"]]
    bad = real.post(what_if, json={"nodes": [{"at": 1, "remove": ""}], "capacity": "x"})
    assert sorted(e["loc"] for e in bad.json()["errors"]) == [["body", "capacity"], ["body", "nodes", 0, "remove"]]
    not_an_object = real.post(what_if, json=[1])
    assert [e["loc"] for e in not_an_object.json()["errors"]] == [["body"]]


def test_the_readme_changes_example_is_valid(document):
    import yaml

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("```yaml\n# changes.yaml", 1)[1].split("\n", 1)[1].split("```", 1)[0]
    example = yaml.safe_load(block)
    assert example["nodes"] and _schema_errors(document, "WhatIfChanges", example) == []
    parse_changes(example)
