"""sha256 of every decision on the benchmark streams: the check that a change left decisions byte-identical.

Runs the decider, preemption and DRA benchmark streams and the HTTP benchmark's stream (decided in
process, as the server decides it) with `service.domain.handle` wrapped, and hashes the canonical JSON
of every input and decision, in order. Prints one JSON object: a digest and a count per stream.
Run it before and after a change that should not change decisions; the digests must be equal.

    python bench/digest.py [--quick]
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import io
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import service.domain as domain  # noqa: E402

_real_handle = domain.handle


class Digest:
    def __init__(self) -> None:
        self.sha = hashlib.sha256()
        self.events = 0

    def add(self, event: Any) -> None:
        line = json.dumps([event.position, event.type, event.data], sort_keys=True, separators=(",", ":"),
                          ensure_ascii=True)
        self.sha.update(line.encode())
        self.sha.update(b"\n")
        self.events += 1


CURRENT = Digest()


def _hashing_handle(state: Any, event: Any, *args: Any, **kwargs: Any) -> Any:
    CURRENT.add(event)
    out = _real_handle(state, event, *args, **kwargs)
    for decision in out:
        CURRENT.add(decision)
    return out


domain.handle = _hashing_handle  # the bench modules import it by name: patch before they load


def run_bench(module: str, argv: list[str]) -> Digest:
    global CURRENT
    CURRENT = Digest()
    mod = importlib.import_module(module)
    if hasattr(mod, "handle"):
        mod.handle = _hashing_handle
    saved = sys.argv
    sys.argv = [module, *argv]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            mod.main()
    finally:
        sys.argv = saved
    return CURRENT


def run_http_stream(workloads: int) -> Digest:
    global CURRENT
    CURRENT = Digest()
    http_load = importlib.import_module("http_load")
    nodes, chunk = http_load.decided_chunk(workloads, 1500, 7)
    digest = Digest()
    for event in [*nodes, *chunk]:
        digest.add(event)
    return digest


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="shorter streams (a minute instead of several)")
    args = ap.parse_args()
    q = args.quick
    results: dict[str, dict[str, Any]] = {}
    runs = {
        "decider": ("decider", ["--workloads", "3000" if q else "20000", "--pending", "500" if q else "10000"]),
        "preemption": ("preemption", ["--preemptors", "30" if q else "200", "--low", "300" if q else "1000"]),
        "dra": ("dra", ["--repeat", "1", "--extra", "60" if q else "200", "--churn", "30" if q else "60"]),
        "composite": ("composite", ["--inputs", "200" if q else "800"]),
    }
    for label, (module, argv) in runs.items():
        d = run_bench(module, argv)
        results[label] = {"events": d.events, "sha256": d.sha.hexdigest()}
    d = run_http_stream(1000 if q else 4000)
    results["http"] = {"events": d.events, "sha256": d.sha.hexdigest()}
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
