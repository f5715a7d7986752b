"""The HTTP adapter through the real Litestar app, over a test double of the application.

`RecordingGangplank` plays the application's two rooms the routes use (`commands` and
`queries`, both itself): it records every call and answers canned results/views. The real
service is tested elsewhere; these tests are about the adapter (validation, errors, auth,
limits, idempotency headers), so the double is enough, and it lets us assert that a request
failing validation never reaches `execute`.
"""
from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from service.api import ApiSettings, TokenGrant, create_app
from service.app.commands import Accepted, Command, Origin, Policy, Result, Submission

ADMIN, SUBMITTER, AUDITOR, WILDCARD = "admin-token", "submitter-token", "auditor-token", "wild-token"
TOKENS = {
    ADMIN: TokenGrant(role="admin"),
    SUBMITTER: TokenGrant(role="submitter", namespaces=frozenset({"team-a"}), name="ci-bot"),
    AUDITOR: TokenGrant(role="auditor"),
    WILDCARD: TokenGrant(role="submitter", namespaces=frozenset({"*"})),
}


class RecordingGangplank:
    def __init__(self) -> None:  # no store: nothing here touches one
        self.commands = self.queries = self
        self.reset()

    def reset(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.result: Result | None = None  # when set, execute() answers this
        self.views: dict[str, Any] = {}
        self.ready = True

    @property
    def executed(self) -> list[tuple[Command, Origin, dict[str, Any]]]:
        return [args for name, args in self.calls if name == "execute"]

    async def execute(self, submission: Submission, policy: Policy, *, dry_run: bool = False) -> Result:
        command = submission.command
        self.calls.append(("execute", (command, submission.origin, {
            "idempotency_key": submission.idempotency_key, "fingerprint": submission.fingerprint,
            "dry_run": dry_run})))
        if self.result is not None:
            return copy.deepcopy(self.result)
        return Accepted(command.type, {"name": command.name, "decisions": []}, positions=[1], dry_run=dry_run)

    async def list_nodes(self, cluster: str) -> list[dict[str, Any]]:
        self.calls.append(("list_nodes", cluster))
        return self.views.get("nodes", [])

    async def get_node(self, cluster: str, name: str) -> dict[str, Any] | None:
        self.calls.append(("get_node", (cluster, name)))
        return self.views.get(("node", name))

    async def list_objects(self, cluster: str, kind: str) -> list[dict[str, Any]]:
        self.calls.append(("list_objects", (cluster, kind)))
        return self.views.get(kind, [])

    async def get_object(self, cluster: str, kind: str, name: str) -> dict[str, Any] | None:
        self.calls.append(("get_object", (cluster, kind, name)))
        return self.views.get((kind, name))

    async def get_workload(self, cluster: str, namespace: str, name: str,
                           position: int | None = None) -> dict[str, Any] | None:
        self.calls.append(("get_workload", (cluster, namespace, name) + ((position,) if position else ())))
        return self.views.get(("workload", namespace, name))

    async def list_workloads(self, cluster: str, *, namespace: str | None, phase: str | None,
                             limit: int, after: int) -> dict[str, Any]:
        self.calls.append(("list_workloads", (cluster, namespace, phase, limit, after)))
        return {"items": [], "next": None}

    async def events(self, cluster: str, *, after: int, limit: int, wait: float) -> dict[str, Any]:
        self.calls.append(("events", (cluster, after, limit, wait)))
        return {"events": [], "lastPosition": 0}

    async def history(self, cluster: str, namespace: str, name: str,
                      position: int | None = None) -> dict[str, Any] | None:
        self.calls.append(("history", (cluster, namespace, name) + ((position,) if position else ())))
        return self.views.get(("history", namespace, name))

    async def state_at(self, cluster: str, at: int | None, *, include_finished: bool = False) -> dict[str, Any]:
        self.calls.append(("state_at", (cluster, at)))
        return {"position": at or 0, "nodes": [], "workloads": []}

    async def verify(self, cluster: str) -> dict[str, Any]:
        self.calls.append(("verify", cluster))
        return {"ok": True, "events": 0, "head": "0" * 64}

    async def clusters(self) -> list[dict[str, Any]]:
        self.calls.append(("clusters", None))
        return [{"name": "prod", "lastPosition": 3}]

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        return self.ready, {"database": self.ready}


_SERVICE = RecordingGangplank()  # shared by the two apps below, reset before every test


@pytest.fixture(scope="session")
def _apps() -> Iterator[tuple[TestClient, TestClient]]:
    with TestClient(create_app(_SERVICE, ApiSettings()), raise_server_exceptions=False) as open_client, \
            TestClient(create_app(_SERVICE, ApiSettings(tokens=TOKENS)), raise_server_exceptions=False) as secured:
        yield open_client, secured


@pytest.fixture
def service() -> RecordingGangplank:
    _SERVICE.reset()
    return _SERVICE


@pytest.fixture
def client(_apps: tuple[TestClient, TestClient], service: RecordingGangplank) -> TestClient:
    """An open API (no tokens) over `service`."""
    return _apps[0]


@pytest.fixture
def secured(_apps: tuple[TestClient, TestClient], service: RecordingGangplank) -> TestClient:
    """An API with the four TOKENS over `service`."""
    return _apps[1]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- bodies from model.md ---------------------------------------------------------------------------

NODE: dict[str, Any] = {
    "labels": {"topology.kubernetes.io/zone": "z1", "example.com/rack": "r1"},
    "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "example.com/gpu": "8"},
    "unschedulable": False,
}
DEVICE_CLASS: dict[str, Any] = {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}
RESOURCE_SLICE: dict[str, Any] = {
    "driver": "gpu.example.com", "pool": {"name": "n1", "generation": 1}, "nodeName": "n1",
    "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "H100"}, "nvlinkDomain": {"int": 0}},
                 "capacity": {"memory": {"value": "80Gi"}}}],
}
PRIORITY_CLASS: dict[str, Any] = {"value": 1000, "preemptionPolicy": "PreemptLowerPriority"}
WORKLOAD: dict[str, Any] = {
    "name": "train-7",
    "priority": 100,
    "preemptionPolicy": "PreemptLowerPriority",
    "podGroups": [
        {"name": "workers",
         "schedulingPolicy": {"gang": {"minCount": 4}},
         "disruptionMode": "Single",
         "topology": {"key": "example.com/rack"},
         "resourceClaims": [{"name": "fabric", "resourceClaimTemplateName": "fabric"}],
         "pods": [{"name": "worker", "count": 4,
                   "requests": {"cpu": "8", "memory": "64Gi"},
                   "nodeSelector": {"example.com/pool": "h100"},
                   "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "four-gpus"},
                                      {"name": "fabric", "resourceClaimTemplateName": "fabric"}]}]}],
    "resourceClaims": [],
    "resourceClaimTemplates": [
        {"name": "four-gpus", "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 4,
                "selectors": [{"cel": {"expression": "device.attributes[\"gpu.example.com\"].model == \"H100\""}}]}}],
            "constraints": [{"requests": ["gpu"], "matchAttribute": "gpu.example.com/nvlinkDomain"}]}}},
        {"name": "fabric", "spec": {"devices": {
            "requests": [{"name": "nic", "exactly": {"deviceClassName": "nic", "allocationMode": "All"}}]}}},
    ],
}

BASE = "/v1/clusters/prod"
# (method, path, valid body or None) for every mutating route
MUTATING_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("PUT", f"{BASE}/nodes/n1", NODE),
    ("DELETE", f"{BASE}/nodes/n1", None),
    ("PUT", f"{BASE}/deviceclasses/gpu", DEVICE_CLASS),
    ("DELETE", f"{BASE}/deviceclasses/gpu", None),
    ("PUT", f"{BASE}/resourceslices/n1-gpus", RESOURCE_SLICE),
    ("DELETE", f"{BASE}/resourceslices/n1-gpus", None),
    ("PUT", f"{BASE}/priorityclasses/high", PRIORITY_CLASS),
    ("POST", f"{BASE}/namespaces/team-a/workloads", WORKLOAD),
    ("POST", f"{BASE}/namespaces/team-a/workloads?dryRun=true", WORKLOAD),
    ("DELETE", f"{BASE}/namespaces/team-a/workloads/train-7", None),
]
BODY_ROUTES = [(m, p, b) for m, p, b in MUTATING_ROUTES if b is not None]


def body(template: dict[str, Any]) -> dict[str, Any]:
    """A deep copy to mutate."""
    return copy.deepcopy(template)
