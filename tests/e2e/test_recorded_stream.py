"""Byte-identical answers: a recorded request stream replayed against today's server.

tests/e2e/recorded/http_stream.json holds the answers (status, the headers of the contract, the
body bytes) that the server gave before the HTTP path was made faster (tests/e2e/recorded_stream.py
says how it was made). Every answer must come back the same, on PostgreSQL and on SQLite.
"""
from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from service.domain.model.rules import RULES
from service.store.migrate import upgrade
from service.store.testing import temporary_postgres_database
from tests.e2e.conftest import open_client
from tests.e2e.recorded_stream import RECORDING, replay, requests, requests_digest


@pytest_asyncio.fixture
async def fresh_pg_url() -> AsyncIterator[str]:
    """A database of its own: the stream's cluster name is fixed."""
    async with temporary_postgres_database("gp_recorded") as url:
        await upgrade(url)
        yield url


def _recorded() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(RECORDING.read_text())
    return document


def test_the_recording_belongs_to_this_stream() -> None:
    document = _recorded()
    assert document["requests_sha256"] == requests_digest(), "the stream changed: its recording is stale"
    statuses = {a["status"] for a in document["answers"]}
    # the stream covers every kind of answer of the submission path
    assert statuses == {200, 201, 404, 409, 413, 415, 422}
    assert sum(1 for a in document["answers"] if a["headers"].get("idempotent-replayed") == "true") >= 10


def _compare(answers: list[dict[str, Any]]) -> None:
    document = _recorded()
    # a change of the rules version (service/domain/model/rules.py) changes decisions on purpose:
    # record the stream again then (`python -m tests.e2e.recorded_stream --write`, the module's docstring)
    assert document["rules"] == RULES, "the rules version changed: record the stream again"
    expected = document["answers"]
    assert len(answers) == len(expected)
    stream = requests()
    for i, (got, want) in enumerate(zip(answers, expected, strict=True)):
        assert got == want, f"answer {i} to {stream[i]['method']} {stream[i]['path']} differs"


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_replayed_answers_are_byte_identical(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if backend == "postgresql":
        url = request.getfixturevalue("fresh_pg_url")
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'recorded.db'}"
    with open_client(url) as client:
        _compare(replay(client))
