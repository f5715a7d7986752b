"""The application service: one unit of work shared by HTTP, Kafka and the CLI.

(Being written: signatures are fixed, bodies are filled in by the app-service author.)
"""
from __future__ import annotations

from typing import Any, Sequence

from service.app.commands import Command, Origin, Outcome


class Gangplank:
    async def execute(self, command: Command, origin: Origin, *, idempotency_key: str | None = None,
                      fingerprint: str | None = None, dry_run: bool = False) -> Outcome:
        """Decide and durably record one command; answer like HTTP would.

        201 (SubmitWorkload) / 200 (others) with the view and "decisions";
        404 unknown name (nothing recorded); 409 duplicate name (nothing recorded) or
        idempotency key reused with a different fingerprint; 422 state rejection
        (unknown priority class), body = problem details with "errors".
        A retry with the same key and fingerprint returns the stored Outcome (replayed=True).
        dry_run: the would-be view, nothing recorded (status 200)."""
        raise NotImplementedError

    # -- reads (views shaped as shared/spec/http.md says) --------------------------------
    async def list_nodes(self, cluster: str) -> list[dict[str, Any]]: raise NotImplementedError
    async def get_node(self, cluster: str, name: str) -> dict[str, Any] | None: raise NotImplementedError
    async def list_objects(self, cluster: str, kind: str) -> list[dict[str, Any]]:
        """kind: "deviceclasses" | "resourceslices" | "priorityclasses"."""
        raise NotImplementedError
    async def get_object(self, cluster: str, kind: str, name: str) -> dict[str, Any] | None: raise NotImplementedError
    async def get_workload(self, cluster: str, namespace: str, name: str) -> dict[str, Any] | None: raise NotImplementedError
    async def list_workloads(self, cluster: str, *, namespace: str | None, phase: str | None,
                             limit: int, after: int) -> dict[str, Any]:
        """{"items": [views in submission order with position > after], "next": last position or null}."""
        raise NotImplementedError
    async def events(self, cluster: str, *, after: int, limit: int, wait: float) -> dict[str, Any]: raise NotImplementedError
    async def history(self, cluster: str, namespace: str, name: str) -> dict[str, Any] | None: raise NotImplementedError
    async def state_at(self, cluster: str, at: int | None) -> dict[str, Any]: raise NotImplementedError
    async def verify(self, cluster: str) -> dict[str, Any]: raise NotImplementedError
    async def clusters(self) -> list[dict[str, Any]]: raise NotImplementedError
    async def readiness(self) -> tuple[bool, dict[str, Any]]: raise NotImplementedError
