"""DRA device allocation (model.md *Devices*). Filled in by the DRA work."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:
    from service.domain.state import ClusterState, Group


@dataclass(frozen=True)
class Allocation:
    claim: tuple  # claim identity
    devices: tuple[tuple[str, str, str], ...]  # (driver, pool, device)


def pod_needs_devices(g: "Group", pod: int) -> bool:
    shape = g.workload.spec.shapes[g.spec.pod_shapes[pod]]
    return bool(shape.claims)


class Ledger:
    def __init__(self, state: "ClusterState") -> None:
        self.state = state
        self._new: list[Allocation] = []

    def try_pod(self, g: "Group", pod: int, node: int) -> bool:
        return False

    def new_allocations(self) -> list[Allocation]:
        return list(self._new)

    def rollback(self) -> None:
        self._new.clear()


def explain_pod(state: "ClusterState", g: "Group", pod: int, ledger: Ledger) -> Any:
    return None


# -- state changes (evolve) ------------------------------------------------------------
def upsert_class(state: "ClusterState", name: str, body: dict[str, Any]) -> None:
    state.device_classes[name] = body


def remove_class(state: "ClusterState", name: str) -> None:
    state.device_classes.pop(name, None)


def upsert_slice(state: "ClusterState", name: str, body: dict[str, Any]) -> None:
    state.resource_slices[name] = body


def remove_slice(state: "ClusterState", name: str) -> None:
    state.resource_slices.pop(name, None)


def workload_added(state: "ClusterState", wl: Any) -> None:
    return None


def workload_released(state: "ClusterState", wl: Any) -> None:
    return None


def claims_allocated(state: "ClusterState", g: "Group", claims: list[dict[str, Any]]) -> None:
    return None


def group_pods_released(state: "ClusterState", g: "Group", pods: list[int]) -> None:
    return None


def losses(state: "ClusterState", input_event: Any) -> list[Any]:
    return []


def claims_released(state: "ClusterState", g: "Group", pods: list[int]) -> list[str]:
    return []


def describe_allocations(state: "ClusterState", g: "Group", allocations: list[Allocation]) -> list[dict[str, Any]]:
    return []


def claim_views(state: "ClusterState", g: "Group") -> list[dict[str, Any]]:
    return []


def canonical(state: "ClusterState") -> Any:
    return {}
