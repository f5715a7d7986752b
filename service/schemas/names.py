"""Name rules of model.md (*Names*), as reusable pydantic types.

Every check returns a Kubernetes-style message (what was wrong, what is expected) and
is also described in the JSON Schema (pattern / maxLength) so that clients can check
names before they send them.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, StrictStr, WithJsonSchema
from pydantic_core import PydanticCustomError

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
QUALIFIED_NAME_MAX = 63
CLUSTER_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(\.{_LABEL})*"
_QUALIFIED = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_C_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"

DNS1123_LABEL_PATTERN = rf"^{_LABEL}$"
DNS1123_SUBDOMAIN_PATTERN = rf"^{_SUBDOMAIN}$"
QUALIFIED_NAME_PATTERN = rf"^({_SUBDOMAIN}/)?{_QUALIFIED}$"
LABEL_VALUE_PATTERN = rf"^({_QUALIFIED})?$"
DEVICE_QUALIFIED_NAME_PATTERN = rf"^({_SUBDOMAIN}/)?{_C_IDENTIFIER}$"
POOL_NAME_PATTERN = rf"^{_SUBDOMAIN}(/{_SUBDOMAIN})*$"

_label_re = re.compile(DNS1123_LABEL_PATTERN)
_subdomain_re = re.compile(DNS1123_SUBDOMAIN_PATTERN)
_qualified_re = re.compile(rf"^{_QUALIFIED}$")
_c_identifier_re = re.compile(rf"^{_C_IDENTIFIER}$")
_cluster_re = re.compile(CLUSTER_PATTERN)

# Python's `$` also matches before a trailing newline: every check below uses fullmatch.


def dns1123_label_error(value: str) -> str | None:
    if len(value) > DNS1123_LABEL_MAX:
        return f"must be no more than {DNS1123_LABEL_MAX} characters"
    if not _label_re.fullmatch(value):
        return ("a DNS-1123 label must consist of lower case alphanumeric characters or '-', "
                "and must start and end with an alphanumeric character")
    return None


def dns1123_subdomain_error(value: str) -> str | None:
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        return f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters"
    if not _subdomain_re.fullmatch(value):
        return ("a DNS-1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character")
    return None


def cluster_name_error(value: str) -> str | None:
    if not _cluster_re.fullmatch(value):
        return ("a cluster name must consist of 1 to 63 lower case alphanumeric characters or '-', "
                "and must start and end with an alphanumeric character")
    return None


def qualified_name_error(value: str) -> str | None:
    """Kubernetes label keys, node-selector keys, resource names: `[prefix/]name`."""
    prefix, slash, name = value.rpartition("/")
    if slash:
        if not prefix:
            return "prefix part must be non-empty"
        if "/" in prefix:
            return "a qualified name must consist of an optional DNS subdomain prefix and a name, separated by one '/'"
        if (error := dns1123_subdomain_error(prefix)) is not None:
            return f"prefix part {error}"
    if not name:
        return "name part must be non-empty"
    if len(name) > QUALIFIED_NAME_MAX:
        return f"name part must be no more than {QUALIFIED_NAME_MAX} characters"
    if not _qualified_re.fullmatch(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character")
    return None


def label_value_error(value: str) -> str | None:
    if len(value) > LABEL_VALUE_MAX:
        return f"must be no more than {LABEL_VALUE_MAX} characters"
    if value and not _qualified_re.fullmatch(value):
        return ("a label value must be empty or consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character")
    return None


def device_qualified_name_error(value: str) -> str | None:
    """Device attribute and capacity names: `[domain/]identifier` (identifier: a C identifier, ≤ 32)."""
    domain, slash, name = value.rpartition("/")
    if slash:
        if "/" in domain or not domain:
            return "must be a C identifier, optionally prefixed by a DNS subdomain and '/'"
        if len(domain) > DNS1123_LABEL_MAX:
            return f"domain part must be no more than {DNS1123_LABEL_MAX} characters"
        if (error := dns1123_subdomain_error(domain)) is not None:
            return f"domain part {error}"
    if len(name) > 32:
        return "name part must be no more than 32 characters"
    if not _c_identifier_re.fullmatch(name):
        return "name part must be a C identifier (letters, digits and '_', not starting with a digit)"
    return None


def pool_name_error(value: str) -> str | None:
    if len(value) > 252:
        return "must be no more than 252 characters"
    for part in value.split("/"):
        if (error := dns1123_subdomain_error(part)) is not None:
            return "must be one or more DNS subdomains separated by '/': " + error
    return None


def driver_name_error(value: str) -> str | None:
    if len(value) > DNS1123_LABEL_MAX:
        return f"must be no more than {DNS1123_LABEL_MAX} characters"
    return dns1123_subdomain_error(value)


def _checker(kind: str, check: Callable[[str], str | None]) -> Callable[[str], str]:
    def validate(value: str) -> str:
        error = check(value)
        if error is not None:
            raise PydanticCustomError(kind, "{reason}", {"reason": error})
        return value
    validate.__name__ = f"check_{kind}"
    return validate


def _name_type(kind: str, check: Callable[[str], str | None], schema: dict[str, Any]) -> Any:
    return Annotated[StrictStr, AfterValidator(_checker(kind, check)), WithJsonSchema({"type": "string", **schema})]


DNSLabel = _name_type("dns1123_label", dns1123_label_error,
                      {"pattern": DNS1123_LABEL_PATTERN, "minLength": 1, "maxLength": DNS1123_LABEL_MAX})
DNSSubdomain = _name_type("dns1123_subdomain", dns1123_subdomain_error,
                          {"pattern": DNS1123_SUBDOMAIN_PATTERN, "minLength": 1, "maxLength": DNS1123_SUBDOMAIN_MAX})
ClusterName = _name_type("cluster_name", cluster_name_error, {"pattern": CLUSTER_PATTERN, "maxLength": 63})
QualifiedName = _name_type("qualified_name", qualified_name_error,
                           {"pattern": QUALIFIED_NAME_PATTERN, "minLength": 1, "maxLength": 317})
LabelValue = _name_type("label_value", label_value_error, {"pattern": LABEL_VALUE_PATTERN, "maxLength": LABEL_VALUE_MAX})
DeviceQualifiedName = _name_type("device_qualified_name", device_qualified_name_error,
                                 {"pattern": DEVICE_QUALIFIED_NAME_PATTERN, "minLength": 1})
DriverName = _name_type("driver_name", driver_name_error,
                        {"pattern": DNS1123_SUBDOMAIN_PATTERN, "minLength": 1, "maxLength": DNS1123_LABEL_MAX})
PoolName = _name_type("pool_name", pool_name_error, {"pattern": POOL_NAME_PATTERN, "minLength": 1, "maxLength": 252})

if TYPE_CHECKING:  # the name types are Annotated strings built at run time
    LabelMap = dict[str, str]
else:
    LabelMap = dict[QualifiedName, LabelValue]
"""Kubernetes labels (and node selectors): keys `[prefix/]name`, values at most 63 characters, possibly empty."""
