"""The audit commands over a running service's HTTP API (client.md, *One address for every command*):
`audit verify` (GET /audit/verify, /audit/checkpoints), `audit explain` (history, the event feed, the
workload list), `replay --verify` and plain `replay` (GET /audit/replay), `replay --what-if` (POST
/audit/what-if) and `export` (the event feed), with `--server`/`GANGPLANK_SERVER`, `--cluster` and
`--token`/`GANGPLANK_TOKEN`, as the client commands talk to it. `--database-url` reads the store itself.

Exit codes as the store's commands: 0, 1 verification failed (or the server refused), 2 the command
cannot run (no events, newer rules, bad changes), 3 the server cannot be reached."""
from __future__ import annotations

import json
import sys
from typing import Any, NoReturn
from urllib.parse import quote

import httpx

from service.cli.common import BROKEN, CANNOT_RUN, console, fail, no_events, out

UNREACHABLE = 3


class Remote:
    """One cluster of one server; every failure ends the command with one line."""

    def __init__(self, server: str, cluster: str, token: str | None) -> None:
        self.server, self.cluster = server.rstrip("/"), cluster
        headers = {"Accept": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
        self.http = httpx.Client(base_url=self.server, headers=headers, timeout=httpx.Timeout(300.0, connect=10.0))
        self.base = f"/v1/clusters/{quote(cluster, safe='')}"

    def call(self, method: str, path: str, *, ok: tuple[int, ...] = (200,), **kwargs: Any) -> tuple[int, Any]:
        try:
            response = self.http.request(method, self.base + path, **kwargs)
        except httpx.TransportError as exc:
            fail(f"error: cannot reach {self.server}: {exc} (give --database-url to read the store itself)",
                 UNREACHABLE)
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text
        if response.status_code not in ok:
            self.refused(response.status_code, body)
        return response.status_code, body

    def refused(self, status: int, body: Any) -> NoReturn:
        detail = body.get("detail") or body.get("title") if isinstance(body, dict) else str(body)[:200]
        errors = body.get("errors") if isinstance(body, dict) else None
        where = "; ".join(f"{'.'.join(map(str, e.get('loc', [])))}: {e.get('msg')}" for e in errors or ())
        fail(f"error: {self.server}: {status} {detail}" + (f" ({where})" if where else ""),
             UNREACHABLE if status >= 500 else BROKEN)

    def events(self, after: int, limit: int = 1000) -> list[dict[str, Any]]:
        return list(self.call("GET", "/events", params={"after": after, "limit": limit})[1]["events"])

    def event_at(self, position: int) -> dict[str, Any] | None:
        found = self.events(position - 1, 1)
        return found[0] if found and found[0]["position"] == position else None

    def close(self) -> None:
        self.http.close()


def _checkpoints(r: Remote, reached: int, public_key: str | None, require: bool, until: int | None = None) -> Any:
    from service.app.checkpoints import check, load_public_key, well_formed

    stored = list(r.call("GET", "/audit/checkpoints")[1].get("items") or [])
    well_formed(stored)
    if until is not None:
        stored = [c for c in stored if c["position"] <= until]
    public = load_public_key(public_key) if public_key else None
    hashes: dict[int, str] = {}
    if public is not None:
        for position in sorted({c["position"] for c in stored if c["position"] <= reached}):
            if (event := r.event_at(position)) is not None:
                hashes[position] = event["hash"]
    return check(stored, hashes.get, reached, public, require=require)


def verify(server: str, cluster: str, token: str | None, public_key: str | None, require: bool) -> None:
    from service.cli.audit_cli import say

    r = Remote(server, cluster, token)
    try:
        verified = r.call("GET", "/audit/verify")[1]
        reached = verified["events"] if verified["ok"] else (verified.get("firstBadPosition") or 1) - 1
        report = _checkpoints(r, reached, public_key, require)
    finally:
        r.close()
    say(cluster, verified, report, bool(public_key or require))


def explain(server: str, cluster: str, token: str | None, namespace: str, name: str,
            position: int | None) -> tuple[Any, dict[int, Any], Any]:
    """(history, causes, names) as the store's explain reads them; the chain checked first."""
    from service.app.audit import Names, causation_positions
    from service.cli.common import broken

    r = Remote(server, cluster, token)
    try:
        verified = r.call("GET", "/audit/verify")[1]
        if not verified["ok"]:
            broken(verified["firstBadPosition"])
        if verified["events"] == 0:
            no_events(cluster)
        status, history = r.call("GET", f"/namespaces/{quote(namespace, safe='')}/workloads/{quote(name, safe='')}"
                                        "/history", ok=(200, 404), params={"position": position} if position else {})
        names = Names(_incarnations(r))
        if status == 404:
            return None, {}, names
        causes = {at: e for at in causation_positions(history["events"]) if (e := r.event_at(at)) is not None}
        return history, causes, names
    finally:
        r.close()


def _incarnations(r: Remote) -> dict[tuple[str, str], list[int]]:
    seen: dict[tuple[str, str], list[int]] = {}
    after = 0
    while True:
        page = r.call("GET", "/workloads", params={"limit": 1000, "after": after})[1]
        for w in page["items"]:
            seen.setdefault((w["namespace"], w["name"]), []).append(w["position"])
        if page.get("next") is None:
            return {k: v for k, v in seen.items() if len(v) > 1}
        after = page["next"]


def replay(server: str, cluster: str, token: str | None, until: int | None, verify_: bool, strict: bool,
           public_key: str | None, require: bool) -> None:
    """The report of GET /audit/replay (the re-decided stream and its summary); with --verify its
    verdict decides the exit code, as the store's replay --verify does."""
    from service.cli.replay_cli import _verdict

    r = Remote(server, cluster, token)
    try:
        status, summary = r.call("GET", "/audit/replay", ok=(200, 404, 409),
                                 params={"until": until} if until is not None else {})
        if status == 404:
            no_events(cluster)
        if status == 409:
            fail(f"error: {summary.get('detail')}", CANNOT_RUN)
        report = None
        if verify_ and (public_key or require or summary.get("checkpoints")):
            reached = summary.get("events", 0) if summary.get("verdict") != "broken" else \
                (summary.get("firstBadPosition") or 1) - 1
            report = _checkpoints(r, reached, public_key, require, until)
            summary["checkpoints"] = report.as_json()
            if report.first_bad_position is not None and not report.another_key:
                summary["verdict"] = "broken"
                summary["firstBadPosition"] = min(report.first_bad_position,
                                                  summary.get("firstBadPosition") or report.first_bad_position)
                console.print(report.problem, markup=False, highlight=False, soft_wrap=True)
    finally:
        r.close()
    out.print_json(json.dumps(summary))
    if verify_:
        _verdict(summary, strict)
        if report is not None and report.another_key:
            console.print(f"{report.problem}; the checkpoints are not trusted", style="red", markup=False,
                          highlight=False, soft_wrap=True)
            raise SystemExit(BROKEN)


def what_if(server: str, cluster: str, token: str | None, changes_path: str, until: int | None,
            output: str) -> str:
    from service.cli import whatif_cli
    from service.store.base import canonical_json

    doc = whatif_cli.read_changes(changes_path)
    if until is not None and isinstance(doc, dict):
        doc = {**doc, "until": until}
    r = Remote(server, cluster, token)
    try:
        status, body = r.call("POST", "/audit/what-if", ok=(200, 404, 409, 422), json=doc if doc is not None else {})
    finally:
        r.close()
    if status == 404:
        no_events(cluster)
    if status == 422:
        first = (body.get("errors") or [{}])[0]
        loc = [p for p in first.get("loc", []) if p != "body"]
        raise whatif_cli.WhatIfFailed(f"error: {changes_path}: {'.'.join(map(str, loc)) or 'the document'}: "
                                      f"{first.get('msg')}", CANNOT_RUN)
    if status == 409:
        raise whatif_cli.WhatIfFailed(f"error: {body.get('detail')}", CANNOT_RUN)
    return canonical_json(body) + "\n" if output == "json" else whatif_cli.table(body)


def export(server: str, cluster: str, token: str | None, until: int | None) -> None:
    """The cluster's events as JSON lines from the event feed, then its signed checkpoints; exit 1 after
    writing them when the chain is broken."""
    from service.cli.common import broken
    from service.store.base import canonical_json

    r = Remote(server, cluster, token)
    try:
        verified = r.call("GET", "/audit/verify")[1]
        if verified["events"] == 0 and verified["ok"]:
            no_events(cluster)
        after = 0
        while batch := r.events(after):
            for event in batch:
                if until is not None and event["position"] > until:
                    break
                sys.stdout.write(canonical_json(event) + "\n")
            after = batch[-1]["position"]
            if until is not None and after >= until:
                break
        for cp in r.call("GET", "/audit/checkpoints")[1].get("items") or []:
            if until is None or cp.get("position", 0) <= until:
                sys.stdout.write(canonical_json({"type": "ChainCheckpoint", **cp}) + "\n")
        sys.stdout.flush()
    finally:
        r.close()
    if not verified["ok"]:
        broken(verified["firstBadPosition"])
