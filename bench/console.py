"""Console benchmark (console.md, *Scale*): each view of the audit console opened in a real browser
(headless Chromium, selenium) on a long stream, timed from the navigation to the view drawn.

Builds bench/audit.py's stream with --nodes nodes (racks of 50; gang workloads with rack topology,
submitted and deleted, decided by the decider, repeated under new namespaces) in an SQLite file with
snapshots every 1,000 events as the service takes them, then starts `gangplank serve` on it and opens
each view --runs times. The first open of a view is "cold" (the service's first read of the cluster);
the figure reported is the median of the other runs, with the slowest.

    python bench/console.py [--events 1000000] [--nodes 5000] [--runs 4] [--dir DIR]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.audit import CLUSTER, build  # noqa: E402
from service.store.migrate import upgrade  # noqa: E402
from tests.console.support import chrome, serve  # noqa: E402

READY = ("const m = document.getElementById('main');"
         "return !!m && !!m.querySelector('h1') && !m.querySelector(':scope > .loading');")


def opened(driver: Any, url: str, until: str = READY, timeout: float = 120) -> float:
    """Seconds from navigation to the view drawn (`until` true)."""
    started = time.perf_counter()
    driver.get(url)
    while not driver.execute_script(until):
        if time.perf_counter() - started > timeout:
            raise TimeoutError(url)
        time.sleep(0.01)
    return time.perf_counter() - started


def views(base: str, head: int) -> dict[str, tuple[str, str]]:
    """The views measured: (URL, when it counts as open)."""
    api = f"{base}/v1/clusters/{CLUSTER}"
    rng = random.Random(7)
    middle = rng.randrange(head // 4, 3 * head // 4)
    live = httpx.get(f"{api}/state", timeout=120).json()["workloads"]
    old = httpx.get(f"{api}/events?after={middle}&limit=1", timeout=60).json()["events"][0]
    data = old["data"]
    namespace, name = data.get("namespace", "ns"), data.get("workload") or data.get("name")
    ui = f"{base}/ui/clusters/{CLUSTER}"
    out = {
        "clusters": (f"{base}/ui", READY),
        "timeline": (ui, READY),
        "timeline chart (the last 5,000 events)": (ui, "return !!document.getElementById('chart-readout');"),
        f"event #{middle}": (f"{ui}/events/{middle}", READY),
        "state at the head": (f"{ui}/state/{head}", READY),
        f"state at #{middle}": (f"{ui}/state/{middle}", READY),
        f"workload story ({namespace}/{name}, finished)": (f"{ui}/workloads/{namespace}/{name}", READY),
        "verification": (f"{ui}/audit", READY),
        "verification's chain verdict": (f"{ui}/audit", "return !!document.querySelector('#chain .notice');"),
    }
    if live:
        w = live[0]
        out[f"workload story ({w['namespace']}/{w['name']}, live)"] = (
            f"{ui}/workloads/{w['namespace']}/{w['name']}", READY)
    return out


def group_open(driver: Any) -> float:
    """Seconds to open the state view's first domain group (its nodes drawn), in the page."""
    return float(driver.execute_script("""
        const d = document.querySelector('details.domain');
        if (!d) return -1;
        const t = performance.now();
        d.open = true; d.dispatchEvent(new Event('toggle'));
        d.querySelector('article.node');
        return (performance.now() - t) / 1000;"""))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--only", default="", help="measure only the views whose name holds this")
    ap.add_argument("--dir", default=None, help="keep the store here (default: a temporary directory)")
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="console-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    db = work / f"console-{args.events}-{args.nodes}.db"
    url = f"sqlite+aiosqlite:///{db}"
    if not db.exists():
        started = time.perf_counter()
        asyncio.run(upgrade(url))
        asyncio.run(build(url, args.events, 1000, nodes=args.nodes))
        print(json.dumps({"built": str(db), "build_s": round(time.perf_counter() - started, 1)}), flush=True)
    server = serve(db, work)
    driver = chrome()
    results: dict[str, Any] = {}
    try:
        head = httpx.get(f"{server.base}/v1/clusters/{CLUSTER}/events?limit=1", timeout=60).json()["lastPosition"]
        for view, (link, until) in views(server.base, head).items():
            if args.only not in view:
                continue
            times = [opened(driver, link, until) for _ in range(args.runs)]
            warm = times[1:] or times
            results[view] = {"cold_s": round(times[0], 2), "median_s": round(statistics.median(warm), 2),
                             "max_s": round(max(warm), 2)}
            if view.startswith("state at the head"):
                results[view]["open_a_group_s"] = round(group_open(driver), 3)
            print(json.dumps({view: results[view]}), flush=True)
    finally:
        driver.quit()
        server.stop()
    views_2s = [r["median_s"] <= 2 for k, r in results.items() if "chart" not in k and "verdict" not in k]
    print(json.dumps({"events": head, "nodes": args.nodes, "runs": args.runs, "views": results,
                      "within_2s": all(views_2s)}))


if __name__ == "__main__":
    main()
