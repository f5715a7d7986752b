"""RFC 9457 problem details, shared by every adapter (HTTP answers, Kafka dead letters)
and usable by the application service for the problem bodies of its Outcomes."""
from __future__ import annotations

from http import HTTPStatus
from typing import Any

PROBLEM_CONTENT_TYPE = "application/problem+json"

# Problem types: https://gangplank.dev/problems/<slug>, the convention of service.app.service.problem
# (there the slug is the title's). They identify the kind of problem; nothing is served there.
PROBLEM_BASE = "https://gangplank.dev/problems/"
VALIDATION = PROBLEM_BASE + "validation-failed"
NOT_FOUND = PROBLEM_BASE + "not-found"
UNAUTHORIZED = PROBLEM_BASE + "unauthorized"
FORBIDDEN = PROBLEM_BASE + "forbidden"
METHOD_NOT_ALLOWED = PROBLEM_BASE + "method-not-allowed"
TOO_LARGE = PROBLEM_BASE + "content-too-large"
NOT_READY = PROBLEM_BASE + "not-ready"
SERVICE_UNAVAILABLE = PROBLEM_BASE + "service-unavailable"
INTERNAL = PROBLEM_BASE + "internal-server-error"


def type_for(title: str) -> str:
    return PROBLEM_BASE + "-".join(title.lower().split())


def title_for(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def problem(status: int, detail: str, *, type: str | None = None, title: str | None = None,
            errors: list[dict[str, Any]] | None = None, **extensions: Any) -> dict[str, Any]:
    """A problem document: {"type", "title", "status", "detail"[, "errors"], ...extensions}.
    `title` defaults to the status phrase, `type` to PROBLEM_BASE + the title's slug."""
    title = title or title_for(status)
    document: dict[str, Any] = {"type": type or type_for(title), "title": title, "status": status, "detail": detail}
    if errors is not None:
        document["errors"] = errors
    document.update(extensions)
    return document


def validation_problem(errors: list[dict[str, Any]], detail: str | None = None) -> dict[str, Any]:
    """422 with `errors: [{"loc": [...], "msg": ...}]`."""
    if detail is None:
        count = len(errors)
        detail = f"{count} field{'s' if count != 1 else ''} failed validation" if count else "validation failed"
    return problem(422, detail, type=VALIDATION, title="Validation failed", errors=errors)
