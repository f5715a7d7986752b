"""JSON Schemas (draft 2020-12) of the bodies and of the Kafka command envelope.

The schemas describe what validation accepts; a few checks cannot be written in JSON
Schema and are only in the models (CEL compiles, quantities are representable, names are
distinct, references resolve, minCount ≤ pod count, at most 10,000 pods).
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, models_json_schema

from service.app.registry import COMMANDS
from service.schemas.envelope import CommandEnvelope
from service.schemas.names import DNS1123_LABEL_PATTERN, DNS1123_SUBDOMAIN_PATTERN
from service.schemas.validate import BODY_MODELS
from service.schemas.whatif_schema import WhatIfChanges

DRAFT = "https://json-schema.org/draft/2020-12/schema"
# documents that are not command bodies but are described beside them (checked by hand elsewhere)
DOCUMENT_MODELS: dict[str, type[BaseModel]] = {"WhatIfChanges": WhatIfChanges}


class _Generator(GenerateJsonSchema):
    def field_title_should_be_set(self, schema: Any) -> bool:  # no "Nodename"-style titles
        return False


def _tidy(node: Any) -> Any:
    """Drop `default: null` (optional fields are simply absent), and describe maps with
    `propertyNames` rather than `patternProperties` (a key that fails the pattern is an error)."""
    if isinstance(node, list):
        return [_tidy(item) for item in node]
    if not isinstance(node, dict):
        return node
    result = {key: _tidy(value) for key, value in node.items() if not (key == "default" and value is None)}
    patterns = result.get("patternProperties")
    if isinstance(patterns, dict) and len(patterns) == 1 and "additionalProperties" not in result:
        ((pattern, value_schema),) = patterns.items()
        del result["patternProperties"]
        result["propertyNames"] = {"pattern": pattern}
        result["additionalProperties"] = value_schema
    return result


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = _tidy(model.model_json_schema(by_alias=True, mode="validation", schema_generator=_Generator))
    return {"$schema": DRAFT, **schema}


def component_schemas(ref_template: str = "#/components/schemas/{model}") -> dict[str, Any]:
    """Every body model and its parts, for an OpenAPI `components.schemas` section."""
    models = [*BODY_MODELS.values(), *DOCUMENT_MODELS.values()]
    _, top = models_json_schema([(model, "validation") for model in models],
                                by_alias=True, ref_template=ref_template, schema_generator=_Generator)
    components: dict[str, Any] = _tidy(top.get("$defs", {}))
    return components


def envelope_schema() -> dict[str, Any]:
    """CommandEnvelope.json; a body `$ref`s the body schema beside it (e.g. "Node.json")."""
    schema = model_schema(CommandEnvelope)
    rules = []
    for command_type, spec in COMMANDS.items():
        kind, for_workload = spec.body, spec.for_workload
        then: dict[str, Any] = {
            "properties": {"name": {"pattern": DNS1123_LABEL_PATTERN if for_workload else DNS1123_SUBDOMAIN_PATTERN,
                                    "maxLength": 63 if for_workload else 253}},
            "required": [],
        }
        if kind is not None:
            then["properties"]["body"] = {"$ref": f"{kind}.json"}
            then["required"].append("body")
        if for_workload:
            then["required"].append("namespace")
        forbidden = [field for field, allowed in (("body", kind is not None), ("namespace", for_workload)) if not allowed]
        if forbidden:
            then["not"] = {"anyOf": [{"required": [field]} for field in forbidden]}
        rules.append({"if": {"properties": {"type": {"const": command_type}}, "required": ["type"]}, "then": then})
    schema["allOf"] = rules
    return schema


def json_schemas() -> dict[str, dict[str, Any]]:
    """{"Node": {...}, ..., "CommandEnvelope": {...}}: one document per contracts/schemas/<Name>.json."""
    documents = {name: model_schema(model) for name, model in {**BODY_MODELS, **DOCUMENT_MODELS}.items()}
    documents["CommandEnvelope"] = envelope_schema()
    return documents
