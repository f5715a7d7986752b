"""Request schemas: strict pydantic models of every body, and their validation.

Entry points:
- validate_body(kind, raw, *, name=None, namespace=None) -> dict (the body as sent)
- validate_envelope(raw) -> ValidatedMessage(id, command); validate_command(raw) -> Command
- InputValidationError: `.errors` = [{"loc": [...], "msg": ...}], `.problem()` = a 422 document
- json_schemas() -> {name: JSON Schema} for the contracts
"""
from service.schemas.devices import DeviceClass, ResourceSlice
from service.schemas.envelope import (
    CommandEnvelope,
    ValidatedMessage,
    idempotency_key_error,
    validate_command,
    validate_envelope,
)
from service.schemas.errors import InputValidationError
from service.schemas.inventory import Node, PriorityClass
from service.schemas.jsonschema import json_schemas
from service.schemas.validate import BODY_MODELS, parse_json, validate_body
from service.schemas.workload import Workload

__all__ = [
    "BODY_MODELS", "CommandEnvelope", "DeviceClass", "InputValidationError", "Node", "PriorityClass",
    "ResourceSlice", "ValidatedMessage", "Workload", "idempotency_key_error", "json_schemas", "parse_json",
    "validate_body", "validate_command", "validate_envelope",
]
