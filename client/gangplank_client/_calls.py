"""Every API request, built once: both clients turn these into methods (client.py)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from gangplank_client import models as m
from gangplank_client._http import Call, call

M = TypeVar("M", bound=BaseModel)


def _one(model: type[M]) -> Callable[[Any], M]:
    return model.model_validate


def _many(model: type[M]) -> Callable[[Any], list[M]]:
    return lambda body: [model.model_validate(item) for item in body["items"]]


def _body(body: Mapping[str, Any] | m.Model) -> Any:
    return body.to_json() if isinstance(body, m.Model) else dict(body)


def _q(segment: str) -> str:
    return quote(segment, safe="")


class Calls:
    """The requests of one cluster (paths relative to /v1/clusters/{cluster})."""

    def __init__(self, cluster: str) -> None:
        self.base = f"/v1/clusters/{_q(cluster)}"

    # -- inventory (admin) --------------------------------------------------------------------
    def put_node(self, name: str, *, allocatable: Mapping[str, str | int], labels: Mapping[str, str] | None = None,
                 taints: Sequence[Mapping[str, str] | m.Taint] | None = None, unschedulable: bool = False,
                 idempotency_key: str | None = None, dry_run: bool = False) -> Call[m.NodeView]:
        """Create or replace node `name`."""
        body: dict[str, Any] = {"allocatable": dict(allocatable), "labels": dict(labels or {})}
        if unschedulable:
            body["unschedulable"] = True
        if taints:
            body["taints"] = [_body(t) for t in taints]
        return self._put("nodes", name, body, m.NodeView, idempotency_key, dry_run)

    def get_node(self, name: str) -> Call[m.NodeView]:
        return call("GET", f"{self.base}/nodes/{_q(name)}", _one(m.NodeView))

    def list_nodes(self) -> Call[list[m.NodeView]]:
        return call("GET", f"{self.base}/nodes", _many(m.NodeView))

    def delete_node(self, name: str, *, idempotency_key: str | None = None,
                    dry_run: bool = False) -> Call[m.Removal]:
        """Remove node `name` (node loss): the answer names every pod released."""
        return self._delete("nodes", name, idempotency_key, dry_run)

    def put_device_class(self, name: str, body: Mapping[str, Any] | m.DeviceClassSpec, *,
                         idempotency_key: str | None = None, dry_run: bool = False) -> Call[m.DeviceClassView]:
        return self._put("deviceclasses", name, _body(body), m.DeviceClassView, idempotency_key, dry_run)

    def get_device_class(self, name: str) -> Call[m.DeviceClassView]:
        return call("GET", f"{self.base}/deviceclasses/{_q(name)}", _one(m.DeviceClassView))

    def list_device_classes(self) -> Call[list[m.DeviceClassView]]:
        return call("GET", f"{self.base}/deviceclasses", _many(m.DeviceClassView))

    def delete_device_class(self, name: str, *, idempotency_key: str | None = None,
                            dry_run: bool = False) -> Call[m.Removal]:
        return self._delete("deviceclasses", name, idempotency_key, dry_run)

    def put_resource_slice(self, name: str, body: Mapping[str, Any] | m.ResourceSliceSpec, *,
                           idempotency_key: str | None = None, dry_run: bool = False) -> Call[m.ResourceSliceView]:
        return self._put("resourceslices", name, _body(body), m.ResourceSliceView, idempotency_key, dry_run)

    def get_resource_slice(self, name: str) -> Call[m.ResourceSliceView]:
        return call("GET", f"{self.base}/resourceslices/{_q(name)}", _one(m.ResourceSliceView))

    def list_resource_slices(self) -> Call[list[m.ResourceSliceView]]:
        return call("GET", f"{self.base}/resourceslices", _many(m.ResourceSliceView))

    def delete_resource_slice(self, name: str, *, idempotency_key: str | None = None,
                              dry_run: bool = False) -> Call[m.Removal]:
        return self._delete("resourceslices", name, idempotency_key, dry_run)

    def put_priority_class(self, name: str, *, value: int, preemption_policy: str | None = None,
                           idempotency_key: str | None = None, dry_run: bool = False) -> Call[m.PriorityClassView]:
        body: dict[str, Any] = {"value": value}
        if preemption_policy is not None:
            body["preemptionPolicy"] = preemption_policy
        return self._put("priorityclasses", name, body, m.PriorityClassView, idempotency_key, dry_run)

    def get_priority_class(self, name: str) -> Call[m.PriorityClassView]:
        return call("GET", f"{self.base}/priorityclasses/{_q(name)}", _one(m.PriorityClassView))

    def list_priority_classes(self) -> Call[list[m.PriorityClassView]]:
        return call("GET", f"{self.base}/priorityclasses", _many(m.PriorityClassView))

    # -- workloads (submitter) ----------------------------------------------------------------
    def submit(self, namespace: str, body: Mapping[str, Any] | m.WorkloadSpec, *,
               idempotency_key: str | None = None, dry_run: bool = False) -> Call[m.WorkloadView]:
        """Submit a workload: its view with the decisions of this pass (dry run: what would result)."""
        return call("POST", f"{self.base}/namespaces/{_q(namespace)}/workloads", _one(m.WorkloadView),
                    params={"dryRun": True} if dry_run else None, body=_body(body), idempotency_key=idempotency_key)

    def get_workload(self, namespace: str, name: str, *, position: int | None = None) -> Call[m.WorkloadView]:
        """The name's latest incarnation, or the one submitted at `position` (lifecycle.md)."""
        return call("GET", self._workload(namespace, name), _one(m.WorkloadView), params={"position": position})

    def delete_workload(self, namespace: str, name: str, *, idempotency_key: str | None = None,
                        dry_run: bool = False) -> Call[m.WorkloadView]:
        """Delete a workload (finished or cancelled): its final view and what the freed room caused."""
        return call("DELETE", self._workload(namespace, name), _one(m.WorkloadView),
                    params={"dryRun": True} if dry_run else None, idempotency_key=idempotency_key)

    def finish_pods(self, namespace: str, name: str, pods: Sequence[Mapping[str, str]], *,
                    idempotency_key: str | None = None, dry_run: bool = False) -> Call[m.WorkloadView]:
        """Report finished pods, each `{"podGroup", "name", "phase": "Succeeded" | "Failed"}`
        (lifecycle.md): the workload view with the decisions of this pass."""
        return call("POST", f"{self._workload(namespace, name)}/podstatus", _one(m.WorkloadView),
                    params={"dryRun": True} if dry_run else None, body={"pods": [dict(p) for p in pods]},
                    idempotency_key=idempotency_key)

    def scale(self, namespace: str, name: str, body: Mapping[str, Any], *, idempotency_key: str | None = None,
              dry_run: bool = False) -> Call[m.WorkloadView]:
        """Change a live workload's sizes (lifecycle.md *Growing and shrinking*): `body` is a sparse
        copy of the spec's lists, e.g. `{"compositePodGroups": [{"name": "serve", "count": 3}]}`."""
        return call("POST", f"{self._workload(namespace, name)}/scale", _one(m.WorkloadView),
                    params={"dryRun": True} if dry_run else None, body=dict(body), idempotency_key=idempotency_key)

    def scale_pods(self, namespace: str, name: str, group: str, entry: str, *, count: int,
                   min_count: int | None = None, idempotency_key: str | None = None,
                   dry_run: bool = False) -> Call[m.WorkloadView]:
        """`scale` for one pod entry of one pod group: its `count`, and with `min_count` the
        gang's `minCount` too (an elastic gang grows all at once)."""
        return self.scale(namespace, name, scale_body(group, entry, count, min_count),
                          idempotency_key=idempotency_key, dry_run=dry_run)

    # -- PodGroup objects (lifecycle.md) ----------------------------------------------------------
    def create_pod_group(self, namespace: str, body: Mapping[str, Any] | m.PodGroupObjectSpec, *,
                         idempotency_key: str | None = None, dry_run: bool = False) -> Call[m.PodGroupView]:
        """Create a PodGroup object from its workload's template (`workloadRef`)."""
        return call("POST", f"{self.base}/namespaces/{_q(namespace)}/podgroups", _one(m.PodGroupView),
                    params={"dryRun": True} if dry_run else None, body=_body(body), idempotency_key=idempotency_key)

    def get_pod_group(self, namespace: str, name: str) -> Call[m.PodGroupView]:
        return call("GET", self._pod_group(namespace, name), _one(m.PodGroupView))

    def delete_pod_group(self, namespace: str, name: str, *, idempotency_key: str | None = None,
                         dry_run: bool = False) -> Call[m.PodGroupView]:
        """Delete a PodGroup object: its final view and what the freed room caused."""
        return call("DELETE", self._pod_group(namespace, name), _one(m.PodGroupView),
                    params={"dryRun": True} if dry_run else None, idempotency_key=idempotency_key)

    def list_pod_groups(self, *, namespace: str | None = None, workload: str | None = None, phase: str | None = None,
                        limit: int | None = None, after: int | None = None) -> Call[m.PodGroupPage]:
        """A page of PodGroup objects in creation order (deleted ones included)."""
        return call("GET", f"{self.base}/podgroups", _one(m.PodGroupPage),
                    params={"namespace": namespace, "workload": workload, "phase": phase, "limit": limit,
                            "after": after})

    def _pod_group(self, namespace: str, name: str) -> str:
        return f"{self.base}/namespaces/{_q(namespace)}/podgroups/{_q(name)}"

    def list_workloads(self, *, namespace: str | None = None, phase: str | None = None, limit: int | None = None,
                       after: int | None = None) -> Call[m.WorkloadPage]:
        """A page of workload views in submission order; pass `page.next` as `after` for the next."""
        return call("GET", f"{self.base}/workloads", _one(m.WorkloadPage),
                    params={"namespace": namespace, "phase": phase, "limit": limit, "after": after})

    # -- audit ----------------------------------------------------------------------------------
    def events(self, *, after: int = 0, limit: int | None = None, wait: float = 0) -> Call[m.EventPage]:
        """One page of the event feed after `after`; `wait` > 0 long-polls up to that many seconds."""
        return call("GET", f"{self.base}/events", _one(m.EventPage),
                    params={"after": after, "limit": limit, "wait": wait or None}, timeout=wait)

    def history(self, namespace: str, name: str, *, position: int | None = None) -> Call[m.History]:
        """The events of the name's latest incarnation, or of the one submitted at `position`."""
        return call("GET", self._workload(namespace, name) + "/history", _one(m.History),
                    params={"position": position})

    def state(self, *, at: int | None = None, include_finished: bool = False) -> Call[m.StateView]:
        return call("GET", f"{self.base}/state", _one(m.StateView),
                    params={"at": at, "includeFinished": True if include_finished else None})

    def verify(self) -> Call[m.Verification]:
        return call("GET", f"{self.base}/audit/verify", _one(m.Verification))

    def clusters(self) -> Call[list[m.ClusterInfo]]:
        return call("GET", "/v1/clusters", _many(m.ClusterInfo))

    # -- helpers --------------------------------------------------------------------------------
    def _workload(self, namespace: str, name: str) -> str:
        return f"{self.base}/namespaces/{_q(namespace)}/workloads/{_q(name)}"

    def _put(self, kind: str, name: str, body: Any, model: type[M], key: str | None, dry_run: bool) -> Call[M]:
        return call("PUT", f"{self.base}/{kind}/{_q(name)}", _one(model), body=body, idempotency_key=key,
                    params={"dryRun": True} if dry_run else None)

    def _delete(self, kind: str, name: str, key: str | None, dry_run: bool) -> Call[m.Removal]:
        return call("DELETE", f"{self.base}/{kind}/{_q(name)}", _one(m.Removal), idempotency_key=key,
                    params={"dryRun": True} if dry_run else None)


def scale_body(group: str, entry: str, count: int, min_count: int | None = None) -> dict[str, Any]:
    """The scale body for one pod entry (and its gang's minCount)."""
    pod_group: dict[str, Any] = {"name": group, "pods": [{"name": entry, "count": count}]}
    if min_count is not None:
        pod_group["schedulingPolicy"] = {"gang": {"minCount": min_count}}
    return {"podGroups": [pod_group]}
