"""Pausing the cyclic garbage collector around bulk work that builds many objects and frees
few (decoding a chunk of rows, folding events into a long-lived state): each collection would
rescan what was just built, costing as much as the work itself."""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# The collector's thresholds for a long-running decider (`gangplank serve`, and the benchmarks that
# measure it). Young collections every 50,000 net allocations and middle ones every 20 of them keep
# each pause short; a full collection only every 1,000 middle ones, because its pause grows with
# everything alive (cluster states are frozen out of it, service.app.service, but decisions keep
# adding to them). Measured (docs/benchmarks.md): with (100,000, 50, 100) the preemption benchmark's
# decision p99 was 35-45 ms, pauses of full collections; with these 15-17 ms, and HTTP submissions/s
# the same (20,000, 10, 1,000 cut the pauses further but cost HTTP 8 % in collections).
SERVE_THRESHOLDS = (50_000, 20, 1_000)


def configure_for_serving() -> None:
    gc.set_threshold(*SERVE_THRESHOLDS)


@contextmanager
def gc_paused(when: bool = True) -> Iterator[None]:
    """The collector off inside (when `when`, and when it is on at all), back on after."""
    paused = when and gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
