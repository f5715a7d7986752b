"""The CLI's side of signed checkpoints (audit.md, *Signed checkpoints*): reading them from a
store or an export, and checking them against the chain a verification recomputed."""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from service.app.checkpoints import CHECKPOINT_TYPE, CheckpointReport, check, load_public_key, well_formed


def file_checkpoints(path: str, cluster: str) -> list[dict[str, Any]]:
    """The ChainCheckpoint lines of an export, for `cluster`."""
    out: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if CHECKPOINT_TYPE not in line:
                continue
            record = json.loads(line)
            if isinstance(record, dict) and record.get("type") == CHECKPOINT_TYPE \
                    and record.get("cluster", cluster) == cluster:
                out.append(record)
    return out


def check_envelopes(checkpoints: list[dict[str, Any]], envelopes: Iterable[dict[str, Any]], reached: int,
                    public_key: str | None, require: bool, until: int | None = None) -> CheckpointReport:
    """Check checkpoints against envelopes whose chain verified up to `reached` (the stored hash of
    an event there is the recomputed one)."""
    well_formed(checkpoints)
    if until is not None:
        checkpoints = [c for c in checkpoints if int(c.get("position", 0)) <= until]
    wanted = {int(c.get("position", 0)) for c in checkpoints}
    hashes = {e["position"]: e.get("hash") for e in envelopes if e["position"] in wanted}
    public = load_public_key(public_key) if public_key else None
    return check(checkpoints, hashes.get, reached, public, require=require)


async def check_store(store: Any, cluster: str, reached: int, public_key: str | None, require: bool,
                      until: int | None = None) -> CheckpointReport:
    """Check the store's checkpoints of `cluster` against its chain, verified up to `reached`."""
    stored = [c.as_json() for c in await store.checkpoints(cluster, until)]
    public = load_public_key(public_key) if public_key else None
    hashes: dict[int, str] = {}
    if public is not None:
        for position in sorted({c["position"] for c in stored if c["position"] <= reached}):
            found = await store.read(cluster, after=position - 1, limit=1)
            if found and found[0].position == position:
                hashes[position] = found[0].hash
    return check(stored, hashes.get, reached, public, require=require)


def words(report: CheckpointReport) -> str:
    """One line for stderr."""
    if report.first_bad_position is not None:
        return f"hash chain broken at position {report.first_bad_position}: {report.problem}"
    if not report.count:
        return "no signed checkpoints"
    trust = "verified with the public key" if report.trusted else "not trusted (no --public-key)"
    return f"{report.count} signed checkpoints, the last at position {report.last_position}: {trust}"
