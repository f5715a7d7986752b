"""read_data(): the lean read that folding uses gives what read() gives, on every backend;
stored texts that msgspec refuses still decode (json.loads fallback)."""
from __future__ import annotations

import pytest

from service.store import EventStore, NewEvent
from service.store.codec import loads


async def test_read_data_equals_read(store: EventStore) -> None:
    odd = {"big": 2**70, "neg": -(2**65), "float": 0.1, "unicode": "caf\u00e9 \U0001f600", "nested": [{"a": None}]}
    events = [NewEvent("NodeUpserted", {"name": f"n{i}", "i": i, **odd}, {"source": "cli"}, schema_version=1 + i % 2)
              for i in range(12)]
    await store.append("c", 0, events[:5])
    await store.append("c", 5, events[5:])
    await store.append("other", 0, events[:2])
    for after, limit, until in [(0, None, None), (0, 5, None), (3, 4, None), (2, None, 9), (11, 10, None),
                                (12, 10, None), (0, 0, None)]:
        full = await store.read("c", after=after, limit=limit, until=until)
        lean = await store.read_data("c", after=after, limit=limit, until=until)
        assert lean == [(e.position, e.type, e.schema_version, e.data) for e in full], (after, limit, until)
        texts = await store.read_data("c", after=after, limit=limit, until=until, decode=False)
        assert [(p, t, v, loads(d)) for p, t, v, d in texts] == lean, (after, limit, until)
        assert all(type(d) is str for *_, d in texts)
    assert [p for p, *_ in await store.read_data("other")] == [1, 2]
    assert await store.read_data("nope") == []


@pytest.mark.parametrize("text", ['{"a":"\\udc80"}', '{"a":1e400}', '[1,2.5,"x",null,true]',
                                  '{"a":123456789012345678901234567890}'])
def test_loads_is_json_loads(text: str) -> None:
    import json
    assert repr(loads(text)) == repr(json.loads(text))
