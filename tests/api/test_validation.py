"""Every kind of bad input is a 422 problem naming the exact field, and never reaches execute()."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.api.conftest import (
    BASE,
    DEVICE_CLASS,
    NODE,
    PRIORITY_CLASS,
    RESOURCE_SLICE,
    WORKLOAD,
    body,
)

NODE_URL = f"{BASE}/nodes/n1"
CLASS_URL = f"{BASE}/deviceclasses/gpu"
SLICE_URL = f"{BASE}/resourceslices/n1-gpus"
PC_URL = f"{BASE}/priorityclasses/high"
WL_URL = f"{BASE}/namespaces/team-a/workloads"

Mutation = Callable[[dict[str, Any]], None]


def assert_422(response: Any, *locs: list[Any]) -> list[dict[str, Any]]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["status"] == 422
    assert {"type", "title", "detail", "errors"} <= problem.keys()
    got = [e["loc"] for e in problem["errors"]]
    for loc in locs:
        assert loc in got, f"{loc} not in {got}"
    assert all(isinstance(e["msg"], str) and e["msg"] for e in problem["errors"])
    return problem["errors"]


def _set(path: list[Any], value: Any) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        target: Any = doc
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value
    return mutate


def _delete(path: list[Any]) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        target: Any = doc
        for part in path[:-1]:
            target = target[part]
        del target[path[-1]]
    return mutate


def _do(*mutations: Mutation) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        for m in mutations:
            m(doc)
    return mutate


POD = ["podGroups", 0, "pods", 0]
TAINTED_NODE: dict[str, Any] = {**NODE, "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                                   {"key": "example.com/drain", "effect": "NoExecute"}]}
REQUIRED = [*POD, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"]
EXPR = [*REQUIRED, 0, "matchExpressions", 0]
FIELD = [*REQUIRED, 0, "matchFields", 0]
PREFERRED = [*POD, "affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution"]
AFFINE_WORKLOAD: dict[str, Any] = body(WORKLOAD)
AFFINE_WORKLOAD["podGroups"][0]["pods"][0].update({
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "example.com/drain", "value": "soon"}],
    "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "example.com/gpu-model", "operator": "In", "values": ["H100", "H200"]}],
             "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [{"key": "example.com/pool", "operator": "Exists"}]}}]}}})
TOLERATION = [*POD, "tolerations", 0]
GPU_REQUEST = ["resourceClaimTemplates", 0, "spec", "devices", "requests", 0]

CASES: list[tuple[str, str, dict[str, Any], Mutation, list[Any]]] = [
    # -- nodes ---------------------------------------------------------------------------------
    ("cpu below a millicore", NODE_URL, NODE, _set(["allocatable", "cpu"], "0.5m"), ["allocatable", "cpu"]),
    ("fractional bytes", NODE_URL, NODE, _set(["allocatable", "memory"], "1.5"), ["allocatable", "memory"]),
    ("negative quantity", NODE_URL, NODE, _set(["allocatable", "pods"], -1), ["allocatable", "pods"]),
    ("malformed quantity", NODE_URL, NODE, _set(["allocatable", "memory"], "64 Gi"), ["allocatable", "memory"]),
    # Python's \d and Decimal take any Unicode digit; Kubernetes quantities are ASCII only
    ("full-width digit quantity", NODE_URL, NODE, _set(["allocatable", "cpu"], "\uff18"), ["allocatable", "cpu"]),
    ("arabic-indic digit quantity", NODE_URL, NODE, _set(["allocatable", "memory"], "\u0664Gi"),
     ["allocatable", "memory"]),
    ("unicode digit exponent", NODE_URL, NODE, _set(["allocatable", "memory"], "1e\u0663"), ["allocatable", "memory"]),
    ("boolean quantity", NODE_URL, NODE, _set(["allocatable", "cpu"], True), ["allocatable", "cpu"]),
    ("float quantity", NODE_URL, NODE, _set(["allocatable", "cpu"], 1.5), ["allocatable", "cpu"]),
    ("bad resource name", NODE_URL, NODE, _set(["allocatable", "-gpu"], "1"), ["allocatable", "-gpu", "[key]"]),
    ("bad label key", NODE_URL, NODE, _set(["labels", "Bad Key"], "x"), ["labels", "Bad Key", "[key]"]),
    ("label prefix not a subdomain", NODE_URL, NODE, _set(["labels", "Example.COM/x"], "x"),
     ["labels", "Example.COM/x", "[key]"]),
    ("label value too long", NODE_URL, NODE, _set(["labels", "a"], "v" * 64), ["labels", "a"]),
    ("label value not a string", NODE_URL, NODE, _set(["labels", "a"], 1), ["labels", "a"]),
    ("unschedulable as a string", NODE_URL, NODE, _set(["unschedulable"], "false"), ["unschedulable"]),
    ("unknown node field", NODE_URL, NODE, _set(["providerID"], "x"), ["providerID"]),
    ("name differs from the path", NODE_URL, NODE, _set(["name"], "n2"), ["name"]),
    ("null for an optional field", NODE_URL, NODE, _set(["labels"], None), ["labels"]),
    # -- taints ----------------------------------------------------------------------------------
    ("taint effect unknown", NODE_URL, TAINTED_NODE, _set(["taints", 0, "effect"], "NoEntry"), ["taints", 0, "effect"]),
    ("taint without effect", NODE_URL, TAINTED_NODE, _delete(["taints", 0, "effect"]), ["taints", 0, "effect"]),
    ("taint without key", NODE_URL, TAINTED_NODE, _delete(["taints", 0, "key"]), ["taints", 0, "key"]),
    ("taint key not a label key", NODE_URL, TAINTED_NODE, _set(["taints", 0, "key"], "nvidia.com/gpu/x"),
     ["taints", 0, "key"]),
    ("taint value not a label value", NODE_URL, TAINTED_NODE, _set(["taints", 0, "value"], "-present"),
     ["taints", 0, "value"]),
    ("taint with timeAdded", NODE_URL, TAINTED_NODE, _set(["taints", 1, "timeAdded"], "2026-01-01T00:00:00Z"),
     ["taints", 1, "timeAdded"]),
    ("same key and effect twice", NODE_URL, TAINTED_NODE,
     lambda d: d["taints"].append({"key": "nvidia.com/gpu", "value": "other", "effect": "NoSchedule"}), ["taints", 2]),
    ("33 taints", NODE_URL, TAINTED_NODE,
     _set(["taints"], [{"key": f"example.com/t{i}", "effect": "NoSchedule"} for i in range(33)]), ["taints"]),
    ("taints not a list", NODE_URL, TAINTED_NODE, _set(["taints"], {"key": "a"}), ["taints"]),
    # -- tolerations -----------------------------------------------------------------------------
    ("tolerationSeconds", WL_URL, AFFINE_WORKLOAD, _set([*TOLERATION, "tolerationSeconds"], 300),
     [*TOLERATION, "tolerationSeconds"]),
    ("Exists with a value", WL_URL, AFFINE_WORKLOAD, _set([*TOLERATION, "value"], "present"), [*TOLERATION, "value"]),
    ("empty key with Equal", WL_URL, AFFINE_WORKLOAD,
     _do(_delete([*TOLERATION, "key"]), _set([*TOLERATION, "operator"], "Equal")), [*TOLERATION, "operator"]),
    ("unknown toleration operator", WL_URL, AFFINE_WORKLOAD, _set([*TOLERATION, "operator"], "Gt"), [*TOLERATION, "operator"]),
    ("unknown toleration effect", WL_URL, AFFINE_WORKLOAD, _set([*TOLERATION, "effect"], "NoEntry"), [*TOLERATION, "effect"]),
    ("toleration key not a label key", WL_URL, AFFINE_WORKLOAD, _set([*TOLERATION, "key"], "Bad Key"), [*TOLERATION, "key"]),
    ("toleration value not a label value", WL_URL, AFFINE_WORKLOAD,
     _do(_set([*TOLERATION, "operator"], "Equal"), _set([*TOLERATION, "value"], "a" * 64)), [*TOLERATION, "value"]),
    ("33 tolerations", WL_URL, AFFINE_WORKLOAD, _set([*POD, "tolerations"], [{"operator": "Exists"}] * 33),
     [*POD, "tolerations"]),
    # -- node affinity ---------------------------------------------------------------------------
    ("unknown affinity operator", WL_URL, AFFINE_WORKLOAD, _set([*EXPR, "operator"], "Within"), [*EXPR, "operator"]),
    ("In without values", WL_URL, AFFINE_WORKLOAD, _delete([*EXPR, "values"]), [*EXPR, "values"]),
    ("NotIn with no values", WL_URL, AFFINE_WORKLOAD, _do(_set([*EXPR, "operator"], "NotIn"), _set([*EXPR, "values"], [])),
     [*EXPR, "values"]),
    ("Exists with values", WL_URL, AFFINE_WORKLOAD, _set([*EXPR, "operator"], "Exists"), [*EXPR, "values"]),
    ("DoesNotExist with values", WL_URL, AFFINE_WORKLOAD, _set([*EXPR, "operator"], "DoesNotExist"), [*EXPR, "values"]),
    ("Gt with a non-integer", WL_URL, AFFINE_WORKLOAD, _do(_set([*EXPR, "operator"], "Gt"), _set([*EXPR, "values"], ["1.5"])),
     [*EXPR, "values", 0]),
    ("Lt with two values", WL_URL, AFFINE_WORKLOAD, _do(_set([*EXPR, "operator"], "Lt"), _set([*EXPR, "values"], ["1", "2"])),
     [*EXPR, "values"]),
    ("Gt beyond int64", WL_URL, AFFINE_WORKLOAD, _do(_set([*EXPR, "operator"], "Gt"), _set([*EXPR, "values"], ["9" * 19])),
     [*EXPR, "values", 0]),
    ("expression key not a label key", WL_URL, AFFINE_WORKLOAD, _set([*EXPR, "key"], "a/b/c"), [*EXPR, "key"]),
    ("expression value not a label value", WL_URL, AFFINE_WORKLOAD, _set([*EXPR, "values", 1], "H 200"),
     [*EXPR, "values", 1]),
    ("unknown expression field", WL_URL, AFFINE_WORKLOAD, _set([*EXPR, "value"], "H100"), [*EXPR, "value"]),
    ("matchFields on labels", WL_URL, AFFINE_WORKLOAD, _set([*FIELD, "key"], "metadata.labels"), [*FIELD, "key"]),
    ("matchFields with Exists", WL_URL, AFFINE_WORKLOAD, _set([*FIELD, "operator"], "Exists"), [*FIELD, "operator"]),
    ("matchFields with two names", WL_URL, AFFINE_WORKLOAD, _set([*FIELD, "values"], ["n1", "n2"]), [*FIELD, "values"]),
    ("matchFields with a bad name", WL_URL, AFFINE_WORKLOAD, _set([*FIELD, "values"], ["N_1"]), [*FIELD, "values", 0]),
    ("no node selector terms", WL_URL, AFFINE_WORKLOAD, _set(REQUIRED, []), REQUIRED),
    ("33 node selector terms", WL_URL, AFFINE_WORKLOAD, _set(REQUIRED, [{"matchExpressions": []}] * 33), REQUIRED),
    ("65 expressions in a term", WL_URL, AFFINE_WORKLOAD,
     _set([*REQUIRED, 0, "matchExpressions"], [{"key": "a", "operator": "Exists"}] * 65), [*REQUIRED, 0, "matchExpressions"]),
    ("terms not a list", WL_URL, AFFINE_WORKLOAD, _set(REQUIRED, {"matchExpressions": []}), REQUIRED),
    ("preferred weight zero", WL_URL, AFFINE_WORKLOAD, _set([*PREFERRED, 0, "weight"], 0), [*PREFERRED, 0, "weight"]),
    ("preferred weight above 100", WL_URL, AFFINE_WORKLOAD, _set([*PREFERRED, 0, "weight"], 101), [*PREFERRED, 0, "weight"]),
    ("preferred without preference", WL_URL, AFFINE_WORKLOAD, _delete([*PREFERRED, 0, "preference"]),
     [*PREFERRED, 0, "preference"]),
    ("preferred bad expression", WL_URL, AFFINE_WORKLOAD,
     _set([*PREFERRED, 0, "preference", "matchExpressions", 0, "values"], ["x"]),
     [*PREFERRED, 0, "preference", "matchExpressions", 0, "values"]),
    ("33 preferred terms", WL_URL, AFFINE_WORKLOAD,
     _set(PREFERRED, [{"weight": 1, "preference": {}}] * 33), PREFERRED),
    ("pod affinity is not supported", WL_URL, AFFINE_WORKLOAD, _set([*POD, "affinity", "podAffinity"], {}),
     [*POD, "affinity", "podAffinity"]),
    # -- device classes ------------------------------------------------------------------------
    ("CEL that does not compile", CLASS_URL, DEVICE_CLASS,
     _set(["selectors", 0, "cel", "expression"], "device.driver =="), ["selectors", 0, "cel", "expression"]),
    # parsed but not compiled by Kubernetes' DRA CEL environment (only `device` is declared, with
    # driver/attributes/capacity; a selector is a bool)
    ("CEL with an undeclared variable", CLASS_URL, DEVICE_CLASS,
     _set(["selectors", 0, "cel", "expression"], "driver == 'gpu.example.com'"), ["selectors", 0, "cel", "expression"]),
    ("CEL with an unknown field of device", CLASS_URL, DEVICE_CLASS,
     _set(["selectors", 0, "cel", "expression"], "device.vendor == 'x'"), ["selectors", 0, "cel", "expression"]),
    ("CEL that is not a bool", CLASS_URL, DEVICE_CLASS,
     _set(["selectors", 0, "cel", "expression"], "device.driver"), ["selectors", 0, "cel", "expression"]),
    ("CEL arithmetic that is not a bool", CLASS_URL, DEVICE_CLASS,
     _set(["selectors", 0, "cel", "expression"], "1 + 1"), ["selectors", 0, "cel", "expression"]),
    ("empty CEL", CLASS_URL, DEVICE_CLASS, _set(["selectors", 0, "cel", "expression"], " "),
     ["selectors", 0, "cel", "expression"]),
    ("CEL over 10 KiB", CLASS_URL, DEVICE_CLASS, _set(["selectors", 0, "cel", "expression"], "a." * 6000 + "b"),
     ["selectors", 0, "cel", "expression"]),
    ("selectors not a list", CLASS_URL, DEVICE_CLASS, _set(["selectors"], {}), ["selectors"]),
    ("unknown selector field", CLASS_URL, DEVICE_CLASS, _set(["selectors", 0, "match"], {}), ["selectors", 0, "match"]),
    # -- resource slices -----------------------------------------------------------------------
    ("two node selections", SLICE_URL, RESOURCE_SLICE, _set(["allNodes"], True), []),
    ("no node selection", SLICE_URL, RESOURCE_SLICE, _delete(["nodeName"]), []),
    ("allNodes false only", SLICE_URL, RESOURCE_SLICE, _do(_delete(["nodeName"]), _set(["allNodes"], False)), []),
    ("empty nodeSelector", SLICE_URL, RESOURCE_SLICE, _do(_delete(["nodeName"]), _set(["nodeSelector"], {})),
     ["nodeSelector"]),
    ("attribute with two types", SLICE_URL, RESOURCE_SLICE,
     _set(["devices", 0, "attributes", "model"], {"string": "H100", "int": 1}), ["devices", 0, "attributes", "model"]),
    ("attribute with no type", SLICE_URL, RESOURCE_SLICE, _set(["devices", 0, "attributes", "model"], {}),
     ["devices", 0, "attributes", "model"]),
    ("attribute int out of int64", SLICE_URL, RESOURCE_SLICE,
     _set(["devices", 0, "attributes", "nvlinkDomain"], {"int": 2**63}), ["devices", 0, "attributes", "nvlinkDomain", "int"]),
    ("attribute version not semver", SLICE_URL, RESOURCE_SLICE,
     _set(["devices", 0, "attributes", "fw"], {"version": "1.2"}), ["devices", 0, "attributes", "fw", "version"]),
    ("attribute name not an identifier", SLICE_URL, RESOURCE_SLICE,
     _set(["devices", 0, "attributes", "2model"], {"string": "x"}), ["devices", 0, "attributes", "2model", "[key]"]),
    ("capacity not a quantity", SLICE_URL, RESOURCE_SLICE,
     _set(["devices", 0, "capacity", "memory"], {"value": "80 GiB"}), ["devices", 0, "capacity", "memory", "value"]),
    ("capacity without value", SLICE_URL, RESOURCE_SLICE, _set(["devices", 0, "capacity", "memory"], {}),
     ["devices", 0, "capacity", "memory", "value"]),
    ("duplicate device names", SLICE_URL, RESOURCE_SLICE,
     _set(["devices"], [{"name": "gpu-0"}, {"name": "gpu-0"}]), ["devices", 1, "name"]),
    ("driver not a subdomain", SLICE_URL, RESOURCE_SLICE, _set(["driver"], "GPU"), ["driver"]),
    ("negative pool generation", SLICE_URL, RESOURCE_SLICE, _set(["pool", "generation"], -1), ["pool", "generation"]),
    ("device name not a label", SLICE_URL, RESOURCE_SLICE, _set(["devices", 0, "name"], "gpu.0"), ["devices", 0, "name"]),
    # -- priority classes ----------------------------------------------------------------------
    ("value above 1e9", PC_URL, PRIORITY_CLASS, _set(["value"], 1_000_000_001), ["value"]),
    ("value as a string", PC_URL, PRIORITY_CLASS, _set(["value"], "1000"), ["value"]),
    ("value missing", PC_URL, PRIORITY_CLASS, _delete(["value"]), ["value"]),
    ("unknown preemption policy", PC_URL, PRIORITY_CLASS, _set(["preemptionPolicy"], "Sometimes"), ["preemptionPolicy"]),
    # -- workloads -----------------------------------------------------------------------------
    ("minCount above the pods", WL_URL, WORKLOAD, _set(["podGroups", 0, "schedulingPolicy", "gang", "minCount"], 5),
     ["podGroups", 0, "schedulingPolicy", "gang", "minCount"]),
    ("minCount zero", WL_URL, WORKLOAD, _set(["podGroups", 0, "schedulingPolicy", "gang", "minCount"], 0),
     ["podGroups", 0, "schedulingPolicy", "gang", "minCount"]),
    ("minCount as a string", WL_URL, WORKLOAD, _set(["podGroups", 0, "schedulingPolicy", "gang", "minCount"], "4"),
     ["podGroups", 0, "schedulingPolicy", "gang", "minCount"]),
    ("both policies", WL_URL, WORKLOAD, _set(["podGroups", 0, "schedulingPolicy", "basic"], {}),
     ["podGroups", 0, "schedulingPolicy"]),
    ("no policy", WL_URL, WORKLOAD, _set(["podGroups", 0, "schedulingPolicy"], {}), ["podGroups", 0, "schedulingPolicy"]),
    ("unknown policy", WL_URL, WORKLOAD, _set(["podGroups", 0, "schedulingPolicy"], {"fifo": {}}),
     ["podGroups", 0, "schedulingPolicy", "fifo"]),
    ("priority and class", WL_URL, WORKLOAD, _set(["priorityClassName"], "high"), ["priorityClassName"]),
    ("priority above 1e9", WL_URL, WORKLOAD, _set(["priority"], 1_000_000_001), ["priority"]),
    ("priority below int32", WL_URL, WORKLOAD, _set(["priority"], -2147483649), ["priority"]),
    ("priority as a float", WL_URL, WORKLOAD, _set(["priority"], 100.0), ["priority"]),
    ("unknown preemption policy", WL_URL, WORKLOAD, _set(["preemptionPolicy"], "Always"), ["preemptionPolicy"]),
    ("no pod groups", WL_URL, WORKLOAD, _set(["podGroups"], []), ["podGroups"]),
    ("duplicate group names", WL_URL, WORKLOAD,
     lambda d: d["podGroups"].append({**d["podGroups"][0], "resourceClaims": []}), ["podGroups", 1, "name"]),
    ("duplicate pod entries", WL_URL, WORKLOAD,
     lambda d: d["podGroups"][0]["pods"].append({"name": "worker"}), ["podGroups", 0, "pods", 1, "name"]),
    ("pod count zero", WL_URL, WORKLOAD, _set([*POD, "count"], 0), [*POD, "count"]),
    ("pod count float", WL_URL, WORKLOAD, _set([*POD, "count"], 4.0), [*POD, "count"]),
    ("group without pods", WL_URL, WORKLOAD, _set(["podGroups", 0, "pods"], []), ["podGroups", 0, "pods"]),
    ("unknown disruption mode", WL_URL, WORKLOAD, _set(["podGroups", 0, "disruptionMode"], "Some"),
     ["podGroups", 0, "disruptionMode"]),
    ("topology without key", WL_URL, WORKLOAD, _set(["podGroups", 0, "topology"], {}), ["podGroups", 0, "topology", "key"]),
    ("bad request quantity", WL_URL, WORKLOAD, _set([*POD, "requests", "cpu"], "8 cores"), [*POD, "requests", "cpu"]),
    ("bad node selector key", WL_URL, WORKLOAD, _set([*POD, "nodeSelector", "a/b/c"], "x"),
     [*POD, "nodeSelector", "a/b/c", "[key]"]),
    ("unknown pod field", WL_URL, WORKLOAD, _set([*POD, "image"], "busybox"), [*POD, "image"]),
    ("claim of a missing template", WL_URL, WORKLOAD, _set([*POD, "resourceClaims", 0, "resourceClaimTemplateName"], "x"),
     [*POD, "resourceClaims", 0, "resourceClaimTemplateName"]),
    ("group claim of a missing template", WL_URL, WORKLOAD,
     _set(["podGroups", 0, "resourceClaims", 0, "resourceClaimTemplateName"], "nope"),
     ["podGroups", 0, "resourceClaims", 0, "resourceClaimTemplateName"]),
    ("duplicate claim names in a pod", WL_URL, WORKLOAD, _set([*POD, "resourceClaims", 1, "name"], "gpus"),
     [*POD, "resourceClaims", 1, "name"]),
    ("duplicate template names", WL_URL, WORKLOAD, _set(["resourceClaimTemplates", 1, "name"], "four-gpus"),
     ["resourceClaimTemplates", 1, "name"]),
    ("CEL of a claim request", WL_URL, WORKLOAD, _set([*GPU_REQUEST, "exactly", "selectors", 0, "cel", "expression"], "(("),
     [*GPU_REQUEST, "exactly", "selectors", 0, "cel", "expression"]),
    ("unknown allocation mode", WL_URL, WORKLOAD, _set([*GPU_REQUEST, "exactly", "allocationMode"], "Some"),
     [*GPU_REQUEST, "exactly", "allocationMode"]),
    ("device count zero", WL_URL, WORKLOAD, _set([*GPU_REQUEST, "exactly", "count"], 0), [*GPU_REQUEST, "exactly", "count"]),
    ("firstAvailable is not supported", WL_URL, WORKLOAD, _set([*GPU_REQUEST, "firstAvailable"], []),
     [*GPU_REQUEST, "firstAvailable"]),
    ("constraint on an unknown request", WL_URL, WORKLOAD,
     _set(["resourceClaimTemplates", 0, "spec", "devices", "constraints", 0, "requests"], ["gpu", "nic"]),
     ["resourceClaimTemplates", 0, "spec", "devices", "constraints", 0, "requests", 1]),
    ("workload name not a label", WL_URL, WORKLOAD, _set(["name"], "Train_7"), ["name"]),
    ("workload name too long", WL_URL, WORKLOAD, _set(["name"], "a" * 64), ["name"]),
    ("workload without name", WL_URL, WORKLOAD, _delete(["name"]), ["name"]),
    ("namespace differs from the path", WL_URL, WORKLOAD, _set(["namespace"], "team-b"), ["namespace"]),
    ("group name not a label", WL_URL, WORKLOAD, _set(["podGroups", 0, "name"], "Workers"), ["podGroups", 0, "name"]),
]


@pytest.mark.parametrize(("url", "template", "mutate", "loc"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_body_is_a_422_naming_the_field(client, service, url, template, mutate, loc):
    doc = body(template)
    mutate(doc)
    method = "POST" if url == WL_URL else "PUT"
    assert_422(client.request(method, url, json=doc), ["body", *loc])
    assert service.executed == []


def test_taints_tolerations_and_affinity_come_back_as_sent(client, service):
    assert client.put(NODE_URL, json=TAINTED_NODE).status_code == 200
    assert service.executed[-1][0].body == TAINTED_NODE
    assert client.post(WL_URL, json=AFFINE_WORKLOAD).status_code == 201
    pod = service.executed[-1][0].body["podGroups"][0]["pods"][0]
    assert pod == AFFINE_WORKLOAD["podGroups"][0]["pods"][0]
    many = {"tolerations": [{"operator": "Exists"}, {"key": "a", "operator": "Exists", "effect": "NoExecute"},
                            {"key": "a", "value": "", "effect": "PreferNoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {}, {"matchExpressions": [{"key": "n", "operator": op, "values": vals} for op, vals in
                                          (("In", ["a"]), ("NotIn", ["b", "c"]), ("Gt", ["007"]), ("Lt", ["9"]))]
                 + [{"key": "e", "operator": "Exists"}, {"key": "d", "operator": "DoesNotExist"}]}]}}}}
    doc = {"name": "w", "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}}, "pods": [{"name": "p", **many}]}]}
    assert client.post(WL_URL, json=doc).status_code == 201


def test_affinity_errors_are_all_named(client, service):
    """Every bad toleration, expression and term of one body in one answer."""
    doc = body(AFFINE_WORKLOAD)
    pod = doc["podGroups"][0]["pods"][0]
    pod["tolerations"][0]["value"] = "x"
    pod["tolerations"][1]["tolerationSeconds"] = 1
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    term["matchExpressions"].append({"key": "k", "operator": "Gt", "values": ["x"]})
    doc["podGroups"][0]["schedulingPolicy"]["gang"]["minCount"] = 9
    errors = assert_422(client.post(WL_URL, json=doc), ["body", *TOLERATION, "value"],
                        ["body", *POD, "tolerations", 1, "tolerationSeconds"],
                        ["body", *REQUIRED, 0, "matchExpressions", 1, "values", 0],
                        ["body", "podGroups", 0, "schedulingPolicy", "gang", "minCount"])
    assert len(errors) == 4
    assert service.executed == []


def test_more_than_ten_thousand_pods(client, service):
    doc = body(WORKLOAD)
    doc["podGroups"] = [{"name": f"g{i}", "schedulingPolicy": {"basic": {}}, "pods": [{"name": "p", "count": 5001}]}
                        for i in range(2)]
    doc["resourceClaimTemplates"] = []
    assert_422(client.post(WL_URL, json=doc), ["body", "podGroups"])
    doc["podGroups"][1]["pods"][0]["count"] = 4999
    assert client.post(WL_URL, json=doc).status_code == 201


def test_nine_pod_groups(client, service):
    doc = body(WORKLOAD)
    doc["podGroups"] = [{"name": f"g{i}", "schedulingPolicy": {"basic": {}}, "pods": [{"name": "p"}]} for i in range(9)]
    assert_422(client.post(WL_URL, json=doc), ["body", "podGroups"])
    assert service.executed == []


def test_every_offending_field_is_named(client, service):
    doc = body(NODE)
    doc["allocatable"]["cpu"] = "x"
    doc["labels"]["a"] = 1
    doc["extra"] = True
    errors = assert_422(client.put(NODE_URL, json=doc), ["body", "allocatable", "cpu"], ["body", "labels", "a"],
                        ["body", "extra"])
    assert len(errors) == 3


@pytest.mark.parametrize("raw", [
    b"", b"   ", b"{", b'{"labels": {}', b"[]", b"null", b"42", b'"node"', b"\xff\xfe{}", b'{"labels": {}} {}',
    b'{"labels": {"a": "1", "a": "2"}}', b'{"allocatable": {"cpu": NaN}}', b'{"allocatable": {"cpu": Infinity}}',
    b'{"labels": {"\\ud800": "x"}}', b"[" * 50_000, b'{"allocatable": {"cpu": ' + b"9" * 5000 + b"}}",
    "{\"labels\": {\"é\": \"x\"}}".encode("utf-16"),
], ids=lambda raw: repr(raw[:24]))
def test_malformed_json_is_a_422_at_body(client, service, raw):
    errors = assert_422(client.put(NODE_URL, content=raw, headers={"Content-Type": "application/json"}))
    assert errors[0]["loc"] == ["body"]
    assert service.executed == []


def test_workload_fields_are_not_coerced(client, service):
    doc = body(WORKLOAD)
    doc["podGroups"][0]["pods"][0]["count"] = "4"
    doc["podGroups"][0]["schedulingPolicy"]["gang"]["minCount"] = True
    assert_422(client.post(WL_URL, json=doc), ["body", *POD, "count"],
               ["body", "podGroups", 0, "schedulingPolicy", "gang", "minCount"])


# -- path segments ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "url", "payload", "loc"), [
    ("PUT", "/v1/clusters/Prod/nodes/n1", NODE, ["path", "cluster"]),
    ("PUT", f"/v1/clusters/{'c' * 64}/nodes/n1", NODE, ["path", "cluster"]),
    ("PUT", "/v1/clusters/-prod/nodes/n1", NODE, ["path", "cluster"]),
    ("PUT", f"{BASE}/nodes/N1", NODE, ["path", "name"]),
    ("PUT", f"{BASE}/nodes/n_1", NODE, ["path", "name"]),
    ("PUT", f"{BASE}/nodes/{'a' * 254}", NODE, ["path", "name"]),
    ("GET", f"{BASE}/nodes/n..1", None, ["path", "name"]),
    ("DELETE", f"{BASE}/resourceslices/Slice", None, ["path", "name"]),
    ("GET", f"{BASE}/deviceclasses/gpu%20class", None, ["path", "name"]),
    ("POST", f"{BASE}/namespaces/Team-A/workloads", WORKLOAD, ["path", "namespace"]),
    ("POST", f"{BASE}/namespaces/team.a/workloads", WORKLOAD, ["path", "namespace"]),
    ("GET", f"{BASE}/namespaces/team-a/workloads/a.b", None, ["path", "name"]),
    ("DELETE", f"{BASE}/namespaces/team-a/workloads/{'w' * 64}", None, ["path", "name"]),
    ("GET", f"{BASE}/namespaces/team-a/workloads/W/history", None, ["path", "name"]),
    ("GET", "/v1/clusters/PROD/events", None, ["path", "cluster"]),
])
def test_bad_path_segment_is_a_422(client, service, method, url, payload, loc):
    assert_422(client.request(method, url, json=payload), loc)
    assert [c for c in service.calls] == []


def test_a_bad_path_and_a_bad_body_are_reported_together(client, service):
    doc = body(NODE)
    doc["unschedulable"] = "yes"
    assert_422(client.put("/v1/clusters/Prod/nodes/n1", json=doc), ["path", "cluster"], ["body", "unschedulable"])
    bad = body(WORKLOAD)
    bad["priority"] = "high"
    assert_422(client.post("/v1/clusters/prod/namespaces/Team_A/workloads", json=bad),
               ["path", "namespace"], ["body", "priority"])
    assert_422(client.delete("/v1/clusters/prod/namespaces/team-a/workloads/W?dryRun=maybe"),
               ["path", "name"], ["query", "dryRun"])
    assert service.executed == []


# -- query parameters ------------------------------------------------------------------------------

@pytest.mark.parametrize(("query", "loc"), [
    ("after=-1", ["query", "after"]),
    ("after=9223372036854775808", ["query", "after"]),
    ("after=abc", ["query", "after"]),
    ("limit=0", ["query", "limit"]),
    ("limit=1001", ["query", "limit"]),
    ("limit=1.5", ["query", "limit"]),
    ("wait=31", ["query", "wait"]),
    ("wait=-0.5", ["query", "wait"]),
    ("wait=nan", ["query", "wait"]),
    ("wait=inf", ["query", "wait"]),
])
def test_events_parameters(client, service, query, loc):
    assert_422(client.get(f"{BASE}/events?{query}"), loc)
    assert service.calls == []


@pytest.mark.parametrize(("query", "loc"), [
    ("limit=0", ["query", "limit"]),
    ("limit=5000", ["query", "limit"]),
    ("after=-3", ["query", "after"]),
    ("phase=Running", ["query", "phase"]),
    ("namespace=Team_A", ["query", "namespace"]),
])
def test_workload_list_parameters(client, service, query, loc):
    assert_422(client.get(f"{BASE}/workloads?{query}"), loc)
    assert service.calls == []


@pytest.mark.parametrize(("url", "locs"), [
    ("/v1/clusters/c1/workloads?limit=0&namespace=X", [["query", "limit"], ["query", "namespace"]]),
    ("/v1/clusters/BAD/events?limit=0&wait=99", [["path", "cluster"], ["query", "limit"], ["query", "wait"]]),
    ("/v1/clusters/BAD/workloads?namespace=X", [["path", "cluster"], ["query", "namespace"]]),
    ("/v1/clusters/BAD/namespaces/Y/workloads/Z?x=1", [["path", "cluster"], ["path", "namespace"], ["path", "name"]]),
    ("/v1/clusters/BAD/nodes/N_1", [["path", "cluster"], ["path", "name"]]),
    ("/v1/clusters/BAD/state?at=-1", [["path", "cluster"], ["query", "at"]]),
])
def test_a_read_names_every_bad_parameter(client, service, url, locs):
    response = client.get(url)
    assert response.status_code == 422, response.text
    assert sorted(e["loc"] for e in response.json()["errors"]) == sorted(locs)
    assert service.calls == []


@pytest.mark.parametrize(("url", "loc"), [
    (f"{BASE}/workloads?namespace=team-a&namespace=team-b", ["query", "namespace"]),
    (f"{BASE}/workloads?limit=5&namespace=a&limit=6", ["query", "limit"]),
    (f"{BASE}/state?at=1&at=2", ["query", "at"]),
    (f"{BASE}/namespaces/team-a/workloads?dryRun=bogus&dry%52un=true", ["query", "dryRun"]),
])
def test_a_query_parameter_given_twice_is_refused(client, service, url, loc):
    method = "POST" if "dryRun" in url else "GET"
    assert_422(client.request(method, url, json={"name": "w"} if method == "POST" else None), loc)
    assert service.calls == []


def test_state_at_must_be_a_position(client, service):
    assert_422(client.get(f"{BASE}/state?at=-1"), ["query", "at"])
    assert_422(client.get(f"{BASE}/state?at=x"), ["query", "at"])
    assert_422(client.get(f"{BASE}/state?at={2**63}"), ["query", "at"])
    assert service.calls == []


def test_dry_run_must_be_a_boolean(client, service):
    assert_422(client.post(f"{WL_URL}?dryRun=maybe", json=WORKLOAD), ["query", "dryRun"])
    assert service.executed == []


# -- the name in the body ----------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "template"), [(NODE_URL, NODE), (CLASS_URL, DEVICE_CLASS), (SLICE_URL, RESOURCE_SLICE),
                                               (PC_URL, PRIORITY_CLASS)])
def test_inventory_name_in_body_must_equal_the_path(client, service, url, template):
    name = url.rsplit("/", 1)[1]
    assert_422(client.put(url, json={**template, "name": name + "x"}), ["body", "name"])
    assert service.executed == []
    assert client.put(url, json={**template, "name": name}).status_code == 200
    command = service.executed[-1][0]
    assert command.name == name and "name" not in command.body


def test_workload_namespace_in_body_must_equal_the_path(client, service):
    assert client.post(WL_URL, json={**WORKLOAD, "namespace": "team-a"}).status_code == 201
    command = service.executed[-1][0]
    assert command.namespace == "team-a" and "namespace" not in command.body and command.body["name"] == "train-7"


@pytest.mark.parametrize("expression", [
    "device.driver == 'gpu.example.com'",
    'device.attributes["gpu.example.com"].model == "H100"',
    'device.capacity["gpu.example.com"].memory >= 1024',
    'device.attributes["gpu.example.com"].exists(a, a == "model")',
    'device.driver == "device.vendor"',  # a field name inside a string is no reference
    "has(device.attributes.x) || true",
    'device.driver.startsWith("gpu") && size(device.attributes) > 0',
])
def test_selectors_kubernetes_compiles_are_accepted(client, service, expression):
    doc = {"selectors": [{"cel": {"expression": expression}}]}
    assert client.put(CLASS_URL, json=doc).status_code == 200


def test_cross_field_rules_are_named_with_the_other_errors(client, service):
    """http.md: the errors name every offending field, also when a rule relating fields (minCount and
    the pods, distinct names, template references, priority with priorityClassName) breaks in a body
    that fails elsewhere too."""
    doc = {"name": "Bad_", "priority": 1, "priorityClassName": "high",
           "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 5}},
                          "resourceClaims": [{"name": "c", "resourceClaimTemplateName": "missing"}],
                          "pods": [{"name": "p", "count": 4, "requests": {"cpu": "lots"}}]},
                         {"name": "g", "schedulingPolicy": {"basic": {}}, "pods": [{"name": "q"}]}]}
    errors = assert_422(client.post(WL_URL, json=doc),
                        ["body", "name"],
                        ["body", "podGroups", 0, "pods", 0, "requests", "cpu"],
                        ["body", "podGroups", 0, "schedulingPolicy", "gang", "minCount"],
                        ["body", "podGroups", 0, "resourceClaims", 0, "resourceClaimTemplateName"],
                        ["body", "podGroups", 1, "name"],
                        ["body", "priorityClassName"])
    assert len({tuple(e["loc"]) for e in errors}) == len(errors)  # each field named once
    assert service.executed == []


def test_resource_maps_are_bounded(client, service):
    """Every resource name is a column of the cluster's capacity table: 30,000 names fit in 1 MiB and
    made one node upsert cost minutes of the decider. At most 128 per map, and per workload."""
    many = {f"example.com/r{i}": "1" for i in range(129)}
    assert_422(client.put(NODE_URL, json={"allocatable": many}), ["body", "allocatable"])
    assert client.put(NODE_URL, json={"allocatable": dict(list(many.items())[:128])}).status_code == 200
    doc = body(WORKLOAD)
    doc["podGroups"][0]["pods"][0]["requests"] = many
    assert_422(client.post(WL_URL, json=doc), ["body", "podGroups", 0, "pods", 0, "requests"])
    doc = {"name": "wide", "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}}, "pods": [
        {"name": f"p{k}", "requests": {f"example.com/r{k}-{i}": "1" for i in range(100)}} for k in range(2)]}]}
    assert_422(client.post(WL_URL, json=doc), ["body", "podGroups"])
    assert [c for c in service.executed if c[0].type == "SubmitWorkload"] == []


def test_device_rules_are_named_with_the_other_errors(client, service):
    """The rules of device bodies (count with All, constraint references, exactly one reach, one
    attribute value, distinct devices) are named in the same answer as the body's other errors."""
    workload = {"name": "w", "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}}, "pods": [
        {"name": "p", "resourceClaims": [{"name": "c", "resourceClaimTemplateName": "t"}]}]}],
        "resourceClaimTemplates": [{"name": "t", "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "All", "count": 2}}],
            "constraints": [{"requests": ["nope"], "matchAttribute": "gpu.example.com/x"}]}}}]}
    response = client.post(f"{BASE}/namespaces/team-a/workloads", json=workload)
    assert response.status_code == 422
    locs = [e["loc"] for e in response.json()["errors"]]
    devices = ["body", "resourceClaimTemplates", 0, "spec", "devices"]
    assert [*devices, "requests", 0, "exactly", "count"] in locs
    assert [*devices, "constraints", 0, "requests", 0] in locs
    piece = {"driver": "gpu.example.com", "pool": {"name": "p"}, "devices": [
        {"name": "d", "attributes": {"a": {"int": 1, "string": "x"}}}, {"name": "d", "capacity": {"m": {"value": "bad"}}}]}
    response = client.put(f"{BASE}/resourceslices/s1", json=piece)
    assert response.status_code == 422
    locs = [e["loc"] for e in response.json()["errors"]]
    assert sorted(map(str, locs)) == sorted(map(str, [
        ["body"], ["body", "devices", 0, "attributes", "a"], ["body", "devices", 1, "name"],
        ["body", "devices", 1, "capacity", "m", "value"]]))
    assert service.calls == []


def test_a_pod_does_not_request_pods(client, service):
    body = {"name": "w", "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}},
                                        "pods": [{"name": "p", "requests": {"pods": "5", "cpu": "1"}}]}]}
    assert_422(client.post(f"{BASE}/namespaces/team-a/workloads", json=body),
               ["body", "podGroups", 0, "pods", 0, "requests", "pods", "[key]"])
    assert service.calls == []
