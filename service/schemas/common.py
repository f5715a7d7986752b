"""Shared pieces of the body models: strict model base, quantities, resource maps."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, PlainValidator, WithJsonSchema
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from service.domain.model.quantity import QuantityError, parse_quantity
from service.schemas.errors import raise_errors
from service.schemas.names import QUALIFIED_NAME_PATTERN, qualified_name_error

PRIORITY_MIN = -2147483648
PRIORITY_MAX = 1000000000
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]

QUANTITY_PATTERN = r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
QUANTITY_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "string", "pattern": QUANTITY_PATTERN}, {"type": "integer", "minimum": 0}],
    "description": "A Kubernetes quantity (\"500m\", \"2\", \"64Gi\", \"1.5\") or a non-negative integer; "
                   "cpu is held in millicores, every other resource in whole base units.",
}


class StrictModel(BaseModel):
    """Bodies are validated like `kubectl --validate=strict`: unknown fields are errors, JSON types
    are never coerced (an int is an int, a string a string), names are the camelCase aliases.

    An optional field is declared `x: T = None`: it may be absent, but an explicit null is an error
    (`T | None` would let null through, and say so in the JSON Schemas). Python's types cannot say
    "absent but never null", so mypy's complaint about those defaults is silenced line by line."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
        hide_input_in_errors=True,
        frozen=True,
    )


def quantity_error(value: Any, resource: str) -> str | None:
    # Kubernetes quantities are ASCII. The domain's parser (Decimal, `\d`) also reads other Unicode
    # digits; it stays so, because streams recorded before this check must still replay.
    if isinstance(value, str) and not value.isascii():
        return f"{value!r} is not a valid quantity"
    try:
        parse_quantity(value, resource)
    except QuantityError as exc:
        return str(exc)
    return None


# At most this many resources in one map (a node's allocatable, a pod's requests), and distinct resource
# names in one workload. Kubernetes sets no number, but real nodes declare a few dozen at most; every
# resource name is a column of the cluster's capacity table, so an unbounded map (30,000 names fit in
# 1 MiB) would make one request cost minutes of the decider's time (docs/http.md, *Validation*).
# A request body is at most this many bytes (HTTP: 413 above it; Kafka: a command, dead-lettered).
MAX_BODY_BYTES = 1024 * 1024
MAX_RESOURCES = 128


def _resource_errors(value: Any) -> list[tuple[tuple[str, ...], str]]:
    """A map resource name → quantity; every error names its key."""
    if not isinstance(value, dict):
        raise PydanticCustomError("dict_type", "Input should be an object")
    if len(value) > MAX_RESOURCES:
        raise PydanticCustomError("too_long", "{reason}",
                                  {"reason": f"at most {MAX_RESOURCES} resources (this has {len(value)})"})
    errors: list[tuple[tuple[str, ...], str]] = []
    for key, amount in value.items():
        if (reason := qualified_name_error(key)) is not None:
            errors.append(((key, "[key]"), f"invalid resource name: {reason}"))
        elif (reason := quantity_error(amount, key)) is not None:
            errors.append(((key,), reason))
    return errors


def _validate_resources(value: Any) -> dict[str, Any]:
    raise_errors("resources", _resource_errors(value))
    resources: dict[str, Any] = value
    return resources


def _validate_requests(value: Any) -> dict[str, Any]:
    """A pod's requests: resources, but not `pods`, which no pod requests (Kubernetes refuses it in
    a container's resources too): a pod uses one `pods` of a node that declares it, implicitly."""
    errors = _resource_errors(value)
    if "pods" in value:
        errors = [e for e in errors if e[0][0] != "pods"]
        errors.append((("pods", "[key]"), "a pod does not request pods: it uses one of a node that "
                                          "declares pods, implicitly"))
    raise_errors("requests", errors)
    requests: dict[str, Any] = value
    return requests


Resources = Annotated[
    dict[str, Any],
    PlainValidator(_validate_resources),
    WithJsonSchema({
        "type": "object",
        "propertyNames": {"type": "string", "pattern": QUALIFIED_NAME_PATTERN},
        "additionalProperties": QUANTITY_SCHEMA,
        "maxProperties": MAX_RESOURCES,
        "description": "Resource name → quantity.",
    }),
]


Requests = Annotated[
    dict[str, Any],
    PlainValidator(_validate_requests),
    WithJsonSchema({
        "type": "object",
        "propertyNames": {"type": "string", "pattern": QUALIFIED_NAME_PATTERN, "not": {"const": "pods"}},
        "additionalProperties": QUANTITY_SCHEMA,
        "maxProperties": MAX_RESOURCES,
        "description": "Resource name → quantity (not `pods`: a pod uses one of a node that declares it).",
    }),
]
