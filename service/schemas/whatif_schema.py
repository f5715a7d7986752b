"""The JSON Schema of the what-if changes document (`POST /audit/what-if`, `replay --what-if`).

The document is checked by hand (service/schemas/whatif.py: its errors are located from the
document's root, and some rules need the recorded stream); these models only describe it, for the
OpenAPI document and contracts/schemas/WhatIfChanges.json. tests/api/test_whatif_schema.py holds
both to the same documents, so that one cannot accept what the other refuses.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictInt, StrictStr

from service.schemas.common import PRIORITY_MAX, PRIORITY_MIN, StrictModel
from service.schemas.inventory import Node
from service.schemas.names import DNSSubdomain
from service.schemas.scheduler import FragmentationAware

Position = Annotated[StrictInt, Field(ge=0, description="A position of the record (0 or more).")]
WORKLOAD_REF = r"^[^/]+/[^/]+$"
DECIMAL = r"^(?=.*[1-9])[0-9]+(\.[0-9]+)?$"  # above 0
_ONE_OF_KINDS: list[Any] = [{"required": [kind]} for kind in ("remove", "add", "cordon", "uncordon")]


class NodeChangeEntry(StrictModel):
    """A node change at a position: exactly one of `remove`, `add` (with `node`), `cordon`, `uncordon`."""
    model_config = ConfigDict(json_schema_extra={
        "oneOf": _ONE_OF_KINDS,
        "if": {"required": ["add"]}, "then": {"required": ["node"]}, "else": {"not": {"required": ["node"]}},
    })
    at: Position
    remove: DNSSubdomain = None  # may be absent, never null: see StrictModel
    add: DNSSubdomain = None
    cordon: DNSSubdomain = None
    uncordon: DNSSubdomain = None
    node: Node = Field(None, description="The node body of `add` (as PUT /nodes/{name} takes it).")  # type: ignore[assignment]


class CapacityChangeEntry(StrictModel):
    """Every matching node's allocatable of `resource` multiplied by `factor`, rounded down."""
    resource: Annotated[StrictStr, Field(min_length=1)]
    factor: StrictInt | StrictStr = Field(
        description="Above 0: an integer, or a decimal string such as \"0.5\".",
        json_schema_extra={"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": DECIMAL}]})
    node_selector: dict[str, StrictStr] = Field(
        default_factory=dict, description="Only nodes whose labels include all of these (every node when absent).")


class WhatIfScoring(StrictModel):
    """The node and domain scores of the what-if world."""
    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"strategy": {"const": "FragmentationAware"}}},
        "then": {"required": ["fragmentationAware"]}, "else": {"not": {"required": ["fragmentationAware"]}},
    })
    strategy: Literal["MostAllocated", "LeastAllocated", "FragmentationAware"]
    fragmentation_aware: FragmentationAware = None  # type: ignore[assignment]


class WhatIfChanges(StrictModel):
    """The changes to re-decide a recorded stream under (every key optional; `{}` changes nothing)."""
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "from": 0, "until": 400, "scoring": {"strategy": "LeastAllocated"}, "priorityClasses": {"batch": 1000},
        "nodes": [{"at": 3, "remove": "n3"},
                  {"at": 5, "add": "n4", "node": {"labels": {"example.com/rack": "r2"},
                                                  "allocatable": {"cpu": "4"}}},
                  {"at": 7, "cordon": "n1"}, {"at": 9, "uncordon": "n1"}],
        "capacity": [{"resource": "cpu", "factor": 2},
                     {"resource": "example.com/gpu", "factor": "0.5",
                      "nodeSelector": {"example.com/rack": "r1"}}],
        "withdraw": ["team-a/train-7"]}]})
    from_: Position = Field(0, alias="from", description="Start after the recorded inputs at or before this "
                                                          "position (default 0).")
    until: Position = Field(None, description="Re-decide the recorded inputs up to this position (default: "  # type: ignore[assignment]
                                              "the last).")
    scoring: WhatIfScoring = None  # type: ignore[assignment]
    priority_classes: dict[str, Annotated[StrictInt, Field(ge=PRIORITY_MIN, le=PRIORITY_MAX)]] = Field(
        default_factory=dict, description="A priority for every submission that names the class.")
    nodes: list[NodeChangeEntry] = Field(default_factory=list, description="Node changes, each at a position "
                                                                          "between from and until.")
    capacity: list[CapacityChangeEntry] = Field(default_factory=list)
    withdraw: list[Annotated[StrictStr, Field(pattern=WORKLOAD_REF)]] = Field(
        default_factory=list, description="Workloads (NAMESPACE/NAME) submitted in the range, taken as never "
                                          "submitted.")
