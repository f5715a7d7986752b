"""The Kafka command envelope of kafka.md (`gangplank.commands`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, Field, StrictStr, ValidationError, WithJsonSchema
from pydantic_core import PydanticCustomError

from service.app.commands import Command
from service.app.registry import COMMAND_TYPES, COMMANDS
from service.schemas.common import StrictModel
from service.schemas.errors import InputValidationError, pydantic_errors
from service.schemas.names import ClusterName, DNSLabel, dns1123_label_error, dns1123_subdomain_error
from service.schemas.validate import parse_json, validate_body

IDEMPOTENCY_KEY_PATTERN = r"^[\x20-\x7e]{1,255}$"

if TYPE_CHECKING:
    CommandTypeName = str
else:  # the registry's types, as an enum of the schema (a Literal built at run time)
    CommandTypeName = Literal[COMMAND_TYPES]


def idempotency_key_error(value: str) -> str | None:
    """Idempotency keys and message ids: 1 to 255 printable ASCII characters (space to '~')."""
    if not 1 <= len(value) <= 255:
        return "must be 1 to 255 characters"
    if not all(" " <= c <= "~" for c in value):
        return "must be printable ASCII (space to '~')"
    return None


def _check_key(value: str) -> str:
    if (reason := idempotency_key_error(value)) is not None:
        raise PydanticCustomError("idempotency_key", "{reason}", {"reason": reason})
    return value


IdempotencyKey = Annotated[StrictStr, AfterValidator(_check_key),
                           WithJsonSchema({"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN,
                                           "minLength": 1, "maxLength": 255})]


class CommandEnvelope(StrictModel):
    """A message on `gangplank.commands` (key = cluster). `namespace` only for workload commands,
    `body` only for upserts and submissions (the same body as the HTTP request, validated by the
    schema of its type)."""
    id: IdempotencyKey = Field(description="The idempotency key, shared with HTTP's Idempotency-Key.")
    cluster: ClusterName
    type: CommandTypeName
    namespace: DNSLabel = None
    name: StrictStr = Field(None, description="The object's name: a DNS-1123 subdomain for nodes, device "  # type: ignore[assignment]  # may be absent, never null: see StrictModel
                                              "classes, slices and priority classes, a DNS-1123 label for "
                                              "workloads; required but for ConfigureScheduler (body only).")
    body: dict[str, Any] = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel


CONFIGURE_SCHEDULER = "ConfigureScheduler"


@dataclass(frozen=True)
class ValidatedMessage:
    id: str
    command: Command


def validate_envelope(raw: bytes | bytearray | memoryview | str | dict[str, Any]) -> ValidatedMessage:
    """Validate a command message and its body; InputValidationError (loc from the message root,
    body errors under ["body", ...]) when anything is wrong. str(error) is the DLQ `error` header."""
    value = raw if isinstance(raw, dict) else parse_json(raw, ())
    if not isinstance(value, dict):
        raise InputValidationError.single((), "a command message must be a JSON object")
    try:
        envelope = CommandEnvelope.model_validate(value, strict=True)
    except ValidationError as exc:
        raise InputValidationError(pydantic_errors(exc)) from None
    spec = COMMANDS[envelope.type]
    kind, for_workload = spec.body, spec.for_workload
    errors: list[dict[str, Any]] = []
    name = envelope.name
    if envelope.type == CONFIGURE_SCHEDULER:  # the cluster's one configuration: addressed by the cluster
        if name is not None:
            errors.append({"loc": ["name"], "msg": f"not allowed for {envelope.type}"})
        name = "scheduler"
    elif name is None:
        errors.append({"loc": ["name"], "msg": "Field required"})
    elif (name_error := (dns1123_label_error if for_workload else dns1123_subdomain_error)(name)) is not None:
        errors.append({"loc": ["name"], "msg": name_error})
    if for_workload and envelope.namespace is None:
        errors.append({"loc": ["namespace"], "msg": f"required for {envelope.type}"})
    if not for_workload and envelope.namespace is not None:
        errors.append({"loc": ["namespace"], "msg": f"not allowed for {envelope.type}"})
    body: dict[str, Any] | None = None
    if kind is None and envelope.body is not None:
        errors.append({"loc": ["body"], "msg": f"not allowed for {envelope.type}"})
    elif kind is not None and envelope.body is None:
        errors.append({"loc": ["body"], "msg": f"required for {envelope.type}"})
    elif kind is not None:
        try:
            body = validate_body(kind, envelope.body, name=name, namespace=envelope.namespace)
        except InputValidationError as exc:
            errors.extend(exc.errors)
    if errors:
        raise InputValidationError(errors)
    assert name is not None
    command = Command(cluster=envelope.cluster, type=envelope.type, name=name,
                      namespace=envelope.namespace if for_workload else None, body=body)
    return ValidatedMessage(id=envelope.id, command=command)


def validate_command(raw: bytes | bytearray | memoryview | str | dict[str, Any]) -> Command:
    """The Command of a valid message (see validate_envelope)."""
    return validate_envelope(raw).command
