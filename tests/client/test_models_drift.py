"""The client's models follow contracts/: a field the server describes and the client does not know,
or one the client sends that the contract does not have, fails here.

- Request bodies: each model against contracts/schemas/<Kind>.json and the OpenAPI request body.
- Responses: each route's response model against the OpenAPI document's response schema, once the
  document describes it (an empty schema `{}` is "not described yet" and is skipped, and listed by
  `test_undescribed_responses_are_still_checked_live`); every operation of the document must be
  mapped to a client model here (or named as not a client call), so a new route fails too.
- Live: answers of a real server parse with no field left over, at any depth.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, create_model

from gangplank_client import Client, WorkloadBuilder
from gangplank_client import models as m

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts"
OPENAPI = json.loads((CONTRACTS / "openapi.json").read_text())

# Fields the client knows before the contract has them: the branches that add them are not on main
# yet. When a contract gains one, it is compared like any other field (this set only excuses absence).
AHEAD = {
    "Workload.compositePodGroups": "composite pod groups (composite.md)",
    "Workload.podGroups[].count": "count on pod groups inside a composite pod group (composite.md)",
}
# The same inside answers, by the name of the contract's schema (a view nests request bodies and views at
# any depth: `getState.200.workloads[].spec.podGroups[].count` is PodGroup.count).
AHEAD_IN_SCHEMAS = {
    "Workload.compositePodGroups": AHEAD["Workload.compositePodGroups"],
    "PodGroup.count": AHEAD["Workload.podGroups[].count"],
    "WorkloadStatus.compositePodGroups": "composite pod groups in the workload view (composite.md, Views)",
    "PodGroupStatus.parent": "a pod group's parent in the workload view (composite.md, Views)",
}
# The client's views share one base with the fields of an answer to a mutating request (`decisions`,
# `dryRun`); the read views (GET) have neither.
MUTATION_FIELDS = {"decisions", "dryRun"}
READ_VIEWS = {"NodeView", "DeviceClassView", "ResourceSliceView", "PriorityClassView", "WorkloadView", "PodGroupView"}
BODIES = {"Workload": m.WorkloadSpec, "Node": m.NodeSpec, "PriorityClass": m.PriorityClassSpec,
          "DeviceClass": m.DeviceClassSpec, "ResourceSlice": m.ResourceSliceSpec, "PodGroupObject": m.PodGroupObjectSpec}


def _items(model: type[BaseModel]) -> type[BaseModel]:
    return create_model(f"{model.__name__}List", __base__=m.Model, items=(list[model], ...))  # type: ignore[valid-type]


# operationId -> (status, model of the answer, model of the request body or None)
RESPONSES: dict[str, tuple[str, type[BaseModel], type[BaseModel] | None]] = {
    "putNode": ("200", m.NodeView, m.NodeSpec), "getNode": ("200", m.NodeView, None),
    "listNodes": ("200", _items(m.NodeView), None), "deleteNode": ("200", m.Removal, None),
    "putDeviceClass": ("200", m.DeviceClassView, m.DeviceClassSpec),
    "getDeviceClass": ("200", m.DeviceClassView, None),
    "listDeviceClasss": ("200", _items(m.DeviceClassView), None), "deleteDeviceClass": ("200", m.Removal, None),
    "putResourceSlice": ("200", m.ResourceSliceView, m.ResourceSliceSpec),
    "getResourceSlice": ("200", m.ResourceSliceView, None),
    "listResourceSlices": ("200", _items(m.ResourceSliceView), None),
    "deleteResourceSlice": ("200", m.Removal, None),
    "putPriorityClass": ("200", m.PriorityClassView, m.PriorityClassSpec),
    "getPriorityClass": ("200", m.PriorityClassView, None),
    "listPriorityClasss": ("200", _items(m.PriorityClassView), None),
    "submitWorkload": ("201", m.WorkloadView, m.WorkloadSpec), "getWorkload": ("200", m.WorkloadView, None),
    "deleteWorkload": ("200", m.WorkloadView, None), "listWorkloads": ("200", m.WorkloadPage, None),
    "reportPodStatus": ("200", m.WorkloadView, None),
    "scaleWorkload": ("200", m.WorkloadView, None),
    "createPodGroup": ("201", m.PodGroupView, m.PodGroupObjectSpec), "getPodGroup": ("200", m.PodGroupView, None),
    "deletePodGroup": ("200", m.PodGroupView, None), "listPodGroups": ("200", m.PodGroupPage, None),
    "listNamespaceWorkloads": ("200", m.WorkloadPage, None),
    "getWorkloadHistory": ("200", m.History, None), "listEvents": ("200", m.EventPage, None),
    "getState": ("200", m.StateView, None), "verifyChain": ("200", m.Verification, None),
    "listClusters": ("200", _items(m.ClusterInfo), None),
}
NOT_CLIENT_CALLS = {"healthz", "readyz", "metrics", "version", "getVersion", "listReplicas",
                    "listCheckpoints", "whatIf", "replayVerify",  # operations, and auditors' tools (audit.md)
                    "getSeries",  # the console's chart (console.md)
                    "getScheduler", "putScheduler"}  # an admin's configuration (sharing.md): no client call yet


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = root
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    branches = [b for b in node.get("anyOf", ()) if b.get("type") != "null"]
    if len(branches) == 1:
        return _resolve(branches[0], root)
    return node


def compare(model: dict[str, Any], contract: dict[str, Any], model_root: dict[str, Any],
            contract_root: dict[str, Any], path: str, seen: set[tuple[int, int]] | None = None) -> list[str]:
    """Where a model's JSON schema and a contract's disagree: fields, enum values, primitive types."""
    mine, theirs = _resolve(model, model_root), _resolve(contract, contract_root)
    if "anyOf" in mine or "anyOf" in theirs or not theirs:
        return []  # a union (a quantity: string or integer), or not described: nothing to compare
    seen = set() if seen is None else seen
    if (id(mine), id(theirs)) in seen:
        return []  # a recursive definition (composite pod groups hold composite pod groups), compared once
    seen.add((id(mine), id(theirs)))
    problems = []
    if "enum" in mine and "enum" in theirs and set(mine["enum"]) - {None} != set(theirs["enum"]) - {None}:
        problems.append(f"{path}: values {sorted(mine['enum'])} here, {sorted(theirs['enum'])} in the contract")
    primitive = {"string", "integer", "boolean", "number"}
    if mine.get("type") in primitive and theirs.get("type") in primitive and mine["type"] != theirs["type"]:
        problems.append(f"{path}: {mine['type']} here, {theirs['type']} in the contract")
    if "properties" in mine and "properties" in theirs:
        for name in sorted(set(theirs["properties"]) - set(mine["properties"])):
            problems.append(f"{path}.{name}: in the contract, not in the client's model")
        for name in sorted(set(mine["properties"]) - set(theirs["properties"])):
            excused = (f"{path}.{name}" in AHEAD or f"{theirs.get('title')}.{name}" in AHEAD_IN_SCHEMAS
                       or (name in MUTATION_FIELDS and theirs.get("title") in READ_VIEWS))
            if not excused:
                problems.append(f"{path}.{name}: in the client's model, not in the contract")
        for name in sorted(set(mine["properties"]) & set(theirs["properties"])):
            problems += compare(mine["properties"][name], theirs["properties"][name], model_root, contract_root,
                                f"{path}.{name}", seen)
    if mine.get("type") == "array" and theirs.get("type") == "array":
        problems += compare(mine.get("items", {}), theirs.get("items", {}), model_root, contract_root, f"{path}[]",
                            seen)
    return problems


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(by_alias=True)


@pytest.mark.parametrize("kind", sorted(BODIES))
def test_request_models_follow_contracts_schemas(kind):
    contract = json.loads((CONTRACTS / "schemas" / f"{kind}.json").read_text())
    schema = _schema(BODIES[kind])
    assert compare(schema, contract, schema, contract, kind) == []


def test_the_comparison_fails_on_drift():
    contract = json.loads((CONTRACTS / "schemas" / "Node.json").read_text())
    contract["properties"]["cordonReason"] = {"type": "string"}
    contract["properties"]["unschedulable"] = {"type": "string"}
    schema = _schema(m.NodeSpec)
    assert compare(schema, contract, schema, contract, "Node") == [
        "Node.cordonReason: in the contract, not in the client's model",
        "Node.unschedulable: boolean here, string in the contract"]
    narrowed = json.loads((CONTRACTS / "schemas" / "Workload.json").read_text())
    narrowed["properties"].pop("priority")
    schema = _schema(m.WorkloadSpec)
    assert compare(schema, narrowed, schema, narrowed, "Workload") == [
        "Workload.priority: in the client's model, not in the contract"]


def _operations() -> dict[str, dict[str, Any]]:
    return {op["operationId"]: op for ops in OPENAPI["paths"].values() for op in ops.values()}


def test_every_operation_has_a_client_model():
    assert set(_operations()) - NOT_CLIENT_CALLS == set(RESPONSES)


@pytest.mark.parametrize("operation", sorted(RESPONSES))
def test_response_and_request_models_follow_the_openapi_document(operation):
    op = _operations()[operation]
    status, answer, request = RESPONSES[operation]
    assert status in op["responses"], f"{operation} does not answer {status}"
    described = (op["responses"][status].get("content") or {}).get("application/json", {}).get("schema") or {}
    schema = _schema(answer)
    assert compare(schema, described, schema, OPENAPI, f"{operation}.{status}") == []
    if request is not None:
        body = op["requestBody"]["content"]["application/json"]["schema"]
        kind = next(k for k, v in BODIES.items() if v is request)
        schema = _schema(request)
        assert compare(schema, body, schema, OPENAPI, kind) == []
    for code, response in op["responses"].items():
        problem = (response.get("content") or {}).get("application/problem+json", {}).get("schema")
        if problem:
            properties = _resolve(problem, OPENAPI).get("properties", {})
            assert {"type", "title", "status", "detail"} <= set(properties), code  # what ProblemError reads
            if "errors" in properties:
                assert set(_resolve(properties["errors"]["items"], OPENAPI)["properties"]) == {"loc", "msg"}, code


def _leftovers(value: Any, path: str = "") -> list[str]:
    """Every field a parsed answer kept without a model field for it."""
    if isinstance(value, BaseModel):
        found = [f"{path}.{k}" for k in (value.model_extra or {})]
        for name in type(value).model_fields:
            found += _leftovers(getattr(value, name), f"{path}.{name}")
        return found
    if isinstance(value, list):
        return [x for i, item in enumerate(value) for x in _leftovers(item, f"{path}[{i}]")]
    return []


def test_undescribed_responses_are_still_checked_live(server, cluster):
    """Until the OpenAPI document describes every answer, a real server's answers are the contract."""
    with Client(server, cluster=cluster) as c:
        answers: list[Any] = [
            c.put_priority_class("high", value=100, preemption_policy="Never"),
            c.put_node("n1", allocatable={"cpu": "4", "pods": "10"}, labels={"r": "a"}),
            c.put_device_class("gpu", {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}),
            c.put_resource_slice("n1-gpus", {"driver": "gpu.example.com", "pool": {"name": "n1", "generation": 1},
                                             "nodeName": "n1", "devices": [{"name": "gpu-0"}]}),
            c.submit("team-a", WorkloadBuilder("fits").claim_template("one", {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}})
                .gang("g", min_count=1).pods("p", requests={"cpu": "1"},
                                            resource_claims=[{"name": "gpu", "resourceClaimTemplateName": "one"}])
                .build()),
            c.submit("team-a", WorkloadBuilder("waits").gang("g", min_count=2).pods("p", count=2, requests={"cpu": "3"})
                     .build()),
            c.get_workload("team-a", "waits"), c.list_workloads(limit=1), c.list_nodes(), c.list_device_classes(),
            c.list_resource_slices(), c.list_priority_classes(), c.history("team-a", "fits"),
            c.events(after=0), c.state(), c.verify(), c.clusters(),
            c.delete_resource_slice("n1-gpus"), c.delete_device_class("gpu"), c.delete_workload("team-a", "fits"),
            c.delete_node("n1"), c.state(at=3, include_finished=True),
        ]
    waits = answers[5]
    reason = waits.status.pod_groups[0].explanation.reasons[0]
    assert (reason.reason, reason.resource, reason.message) == ("Insufficient", "cpu", "Insufficient cpu")
    assert answers[4].status.pod_groups[0].claims[0].devices[0].device == "gpu-0"
    leftovers = [x for a in answers for x in _leftovers(a, type(a).__name__)]
    assert leftovers == []
