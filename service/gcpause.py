"""Pausing the cyclic garbage collector around bulk work that builds many objects and frees
few (decoding a chunk of rows, folding events into a long-lived state): each collection would
rescan what was just built, costing as much as the work itself."""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


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
