"""bench/digest.py with the wording left out: the check that a change of explanations left every
placement and every victim as it was.

Hashes the same streams as digest.py, but drops from each event the explanation parts of
shared/spec/audit.md (*Verifying across releases*): at any depth every `explanation`, `message`,
`why` and `rules`; in a victim unit (a `PodGroupPreempted`'s data, an entry of `preemption.victims`)
its `reason` and `minCount`; in a reprieved unit its `reason`. What is left — the inputs, pods and
nodes placed, domains, claims, victims and their pods, `wholeGroup`, the reprieved units themselves —
must hash the same before and after. Besides digest.py's streams it hashes a preemption stream that
evicts (the quick one does not). Copy this file into a checkout of the old code's bench/ and run it
there too, then compare:

    python bench/placement_digest.py [--quick] [--compare OLD.json]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import digest  # noqa: E402  (patches service.domain.handle on import)

WORDING = ("explanation", "why", "message", "rules")
UNIT = ("reason", "minCount")  # of a victim unit or a reprieved one


def strip(value: Any, unit: bool = False) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in WORDING or (unit and k in UNIT):
                continue
            out[k] = strip(v, k in ("victims", "reprieved"))
        return out
    if isinstance(value, list):
        return [strip(v, unit) for v in value]
    return value


def _add(self: digest.Digest, event: Any) -> None:
    data = strip(event.data)
    if event.type == "PodGroupPreempted":  # a victim unit
        for k in UNIT:
            data.pop(k, None)
    line = json.dumps([event.position, event.type, data], sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    self.sha.update(line.encode())
    self.sha.update(b"\n")
    self.events += 1


digest.Digest.add = _add  # type: ignore[method-assign]  # the one change: what a line hashes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--compare", type=Path, help="the JSON this script printed on the old code")
    args = ap.parse_args()
    sys.argv = [sys.argv[0], *(["--quick"] if args.quick else [])]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        digest.main()
    results = json.loads(buf.getvalue())
    # the quick preemption stream evicts nothing: add one that does (4,532 PodGroupPreempted)
    d = digest.run_bench("preemption", ["--preemptors", "200", "--low", "1000"])
    results["preemption-evicting"] = {"events": d.events, "sha256": d.sha.hexdigest()}
    print(json.dumps(results, indent=1))
    if args.compare:
        old = json.loads(args.compare.read_text())
        differ = [k for k in results if results[k] != old.get(k)]
        print("placements and victims: " + ("identical" if not differ else f"DIFFER in {differ}"))
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
