"""The composition root and the command registry: what adapters get, and what derives from the list."""
from __future__ import annotations

import pytest

from service.app.registry import COMMAND_TYPES, COMMANDS
from service.bootstrap import service_for
from service.domain.decide.commands import ACCEPT
from service.schemas.envelope import CommandEnvelope
from service.schemas.jsonschema import envelope_schema
from service.schemas.validate import BODY_MODELS
from service.store.base import StoreError, StoreUnavailable


def test_every_command_type_comes_from_the_registry():
    assert COMMANDS.keys() == ACCEPT.keys()
    assert CommandEnvelope.model_json_schema()["properties"]["type"]["enum"] == list(COMMAND_TYPES)
    rules = [rule["if"]["properties"]["type"]["const"] for rule in envelope_schema()["allOf"]]
    assert rules == list(COMMAND_TYPES)
    assert {spec.body for spec in COMMANDS.values()} - {None} == set(BODY_MODELS)


async def test_a_database_never_migrated_is_the_stores_own_error(tmp_path):
    """The store translates its driver's errors: nothing above it knows SQLAlchemy."""
    async with service_for(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}") as app:
        with pytest.raises(StoreUnavailable, match="no such table"):
            await app.queries.clusters()


async def test_a_url_that_cannot_be_used_is_a_store_error():
    with pytest.raises(StoreError):
        async with service_for("sqlite+nosuchdriver:///x.db"):
            pass
