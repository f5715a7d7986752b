"""Names in the path (and `?namespace=`): checked by the handlers, and also when Litestar refuses a
request's other parameters first, so that one 422 names every bad field (http.md *Errors*)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.schemas.names import cluster_name_error, dns1123_label_error, dns1123_subdomain_error

_SEGMENT_CHECKS: dict[str, Callable[[str], str | None]] = {
    "cluster": cluster_name_error,
    "namespace": dns1123_label_error,
    "workload": dns1123_label_error,
    "object": dns1123_subdomain_error,
}


def segment_errors(*segments: tuple[str, str, str]) -> list[dict[str, Any]]:
    """(param name, value, kind) → an error at ["path", name] for every bad segment."""
    errors = []
    for param, value, kind in segments:
        if (reason := _SEGMENT_CHECKS[kind](value)) is not None:
            errors.append({"loc": ["path", param], "msg": reason})
    return errors


def route_name_errors(scope: Any, namespace_query: str | None) -> list[dict[str, Any]]:
    """The errors of a routed request's path names and, on the workload list, of `?namespace=`."""
    template = scope.get("path_template") or ""
    segments = []
    for param, value in (scope.get("path_params") or {}).items():
        if not isinstance(value, str):
            continue
        if param in ("cluster", "namespace"):
            kind = param
        elif param == "name":
            kind = "workload" if "/workloads/{name" in template else "object"
        else:
            continue
        segments.append((param, value, kind))
    errors = segment_errors(*segments)
    if namespace_query is not None and template.endswith("}/workloads") and "/namespaces/" not in template:
        if (reason := dns1123_label_error(namespace_query)) is not None:
            errors.append({"loc": ["query", "namespace"], "msg": reason})
    return errors
