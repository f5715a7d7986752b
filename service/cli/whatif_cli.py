"""`gangplank replay --what-if CHANGES.yaml` (audit.md, *What-if*): read the changes (YAML or JSON)
and the recorded stream (a store or an export), check the hash chain, re-decide, print the report
(a table, or canonical JSON). Records nothing."""
from __future__ import annotations

import asyncio
import sys
from typing import Any

import yaml

from service.app.audit import chain_break, read_jsonl
from service.app.whatif import WhatIfInvalid, WhatIfUnfoldable, domain_events, report
from service.schemas.errors import InputValidationError
from service.schemas.whatif import parse_changes
from service.store.base import canonical_json


class NoEvents(Exception):
    """The cluster has no events."""


class WhatIfFailed(Exception):
    """The command's one line and exit code (2: the changes, or a record this code cannot re-decide;
    1: a broken chain)."""

    def __init__(self, line: str, code: int) -> None:
        super().__init__(line)
        self.line, self.code = line, code


def _where(loc: list[Any]) -> str:
    return ".".join(str(p) for p in loc) or "the document"


def read_changes(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except yaml.YAMLError as exc:
        raise WhatIfFailed(f"error: {path} is not YAML or JSON: {str(exc).splitlines()[0]}", 2) from exc


async def _store_rows(url: str, cluster: str) -> tuple[list[Any], int | None]:
    from service.bootstrap import service_for

    async with service_for(url) as service:
        store = service.store
        verified = await store.verify(cluster)
        if verified.ok and verified.events == 0:
            return [], None
        rows: list[Any] = []
        after = 0
        while batch := await store.read_data(cluster, after=after, limit=50_000):
            rows.extend(batch)
            after = batch[-1][0]
        return rows, None if verified.ok else verified.first_bad_position


def run(cluster: str, changes_path: str, until: int | None, output: str, from_file: str | None,
        url: str) -> str:
    """The report as printed; WhatIfFailed for the changes or the chain, NoEvents for none."""
    try:
        changes = parse_changes(read_changes(changes_path))
    except InputValidationError as exc:
        first = exc.errors[0]
        raise WhatIfFailed(f"error: {changes_path}: {_where(first['loc'])}: {first['msg']}", 2) from exc
    if from_file:
        envelopes = [e for e in read_jsonl(from_file) if e.get("cluster", cluster) == cluster]
        broken = chain_break(envelopes)
        rows = [(e["position"], e["type"], e.get("schemaVersion", 1), e["data"]) for e in envelopes]
    else:
        rows, broken = asyncio.run(_store_rows(url, cluster))
    if broken is not None:
        raise WhatIfFailed(f"hash chain broken at position {broken}: the record was altered or cut there", 1)
    if not rows:
        raise NoEvents(cluster)
    try:
        result = report(cluster, domain_events(rows), changes, until)
    except WhatIfInvalid as exc:
        raise WhatIfFailed(f"error: {changes_path}: {_where(exc.loc)}: {exc.msg}", 2) from exc
    except WhatIfUnfoldable as exc:
        raise WhatIfFailed(f"error: {exc}", 2) from exc
    return canonical_json(result) + "\n" if output == "json" else table(result)


_WITHDRAWN = object()


def _cell(recorded: Any, whatif: Any) -> str:
    """`recorded`, or `recorded → what-if` when they differ (a withdrawn workload: recorded only)."""
    a = "-" if recorded is None else str(recorded)
    if whatif is _WITHDRAWN:
        return a
    b = "-" if whatif is None else str(whatif)
    return a if a == b else f"{a} → {b}"


_COLUMNS = (("SCHEDULED AT", "scheduledAt"), ("WAIT", "wait"), ("PODS", "placedPods"),
            ("SUFFERED", "preemptionsSuffered"), ("CAUSED", "preemptionsCaused"), ("PHASE", "phase"))


def table(result: dict[str, Any]) -> str:
    """One row per workload, a cell that differs as `recorded → what-if`, then the totals."""
    header = ["NAMESPACE/NAME", "SUBMITTED", *(c for c, _ in _COLUMNS)]
    rows = [header]
    for w in result["workloads"]:
        rec, wi = w["recorded"], w["whatIf"]
        name = f"{w['namespace']}/{w['name']}" + (" (withdrawn)" if w["withdrawn"] else "")
        rows.append([name, str(w["submittedAt"]),
                     *(_cell(rec[k], _WITHDRAWN if wi is None else wi[k]) for _, k in _COLUMNS)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    tr, tw = result["totals"]["recorded"], result["totals"]["whatIf"]
    lines.append("")
    lines.append(f"range {result['from']}..{result['until']}: {result['inputs']['recorded']} recorded inputs, "
                 f"{result['inputs']['changes']} changes decided, {result['inputs']['skipped']} skipped")
    for key in ("workloads", "scheduled", "neverScheduled", "meanWait", "preemptions"):
        lines.append(f"{key}: {_cell(tr[key], tw[key])}")
    for resource in sorted(set(tr["utilisation"]) | set(tw["utilisation"])):
        lines.append(f"utilisation {resource}: "
                     f"{_cell(tr['utilisation'].get(resource), tw['utilisation'].get(resource))}")
    return "\n".join(lines) + "\n"


def write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
