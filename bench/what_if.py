"""What-if benchmark (audit.md, *What-if*): `gangplank replay --what-if` end to end on a long stream
with a change at its start (every input re-decided), and `gangplank replay --verify` on the same stream.

Builds the stream of bench/audit.py (500 nodes; gang workloads with topology submitted and deleted,
decided by the decider, repeated under new namespaces) in a fresh SQLite file, then runs the two
commands as subprocesses, as a user would, and prints recorded events per second of each.

    python bench/what_if.py [--events 1000000] [--dir DIR] [--skip-verify]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.audit import CLUSTER, build  # noqa: E402
from service.store.migrate import upgrade  # noqa: E402

GANGPLANK = [sys.executable, "-m", "service"]


def timed(args: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    done = subprocess.run([*GANGPLANK, *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return time.perf_counter() - t0, done


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--dir", default=None, help="keep the stream here (default: a temporary directory)")
    ap.add_argument("--skip-verify", action="store_true")
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="whatif-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    db = work / f"stream-{args.events}.db"
    url = f"sqlite+aiosqlite:///{db}"
    if not db.exists():
        asyncio.run(upgrade(url))
        asyncio.run(build(url, args.events, 10**12))  # no snapshots: neither command reads them
    changes = work / "changes.yaml"
    # a change at the start: one node cordoned before the first input after position 1, and a
    # capacity factor on every node body, so every recorded input is re-decided under changes
    changes.write_text("nodes: [{at: 1, cordon: n0000}]\ncapacity: [{resource: memory, factor: 2}]\n")
    seconds, done = timed(["replay", "--cluster", CLUSTER, "--database-url", url, "--what-if", str(changes),
                           "--output", "json"])
    if done.returncode != 0:
        raise SystemExit(f"what-if failed: {done.stderr}")
    doc = json.loads(done.stdout)
    out = {"events": args.events, "whatIf_s": round(seconds, 1), "whatIf_events_per_s": round(args.events / seconds),
           "inputs": doc["inputs"], "workloads": len(doc["workloads"])}
    if not args.skip_verify:
        seconds, done = timed(["replay", "--cluster", CLUSTER, "--database-url", url, "--verify"])
        out.update(verify_s=round(seconds, 1), verify_events_per_s=round(args.events / seconds),
                   verify_exit=done.returncode)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
