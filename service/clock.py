"""Wall-clock timestamps for envelopes (receivedAt, recordedAt): adapters only, never the decider."""
from __future__ import annotations

import time

_second: tuple[int, str] = (-1, "")  # the last whole second formatted, reused within it


def utc_now() -> str:
    """RFC 3339 UTC with microseconds and "Z", e.g. 2026-11-30T10:00:00.001234Z (the text
    datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ") gives, at a fraction of the cost)."""
    global _second
    seconds, micros = divmod(time.time_ns() // 1000, 1_000_000)
    if seconds != _second[0]:
        _second = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
    return f"{_second[1]}.{micros:06d}Z"
