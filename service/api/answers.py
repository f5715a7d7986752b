"""The application's typed results as HTTP answers: (status, body or problem document).

The one place where a result gets its status. The same encoding is what an idempotency record
keeps (Policy.stored_answer), so that a retry answers the very same status and bytes.
"""
from __future__ import annotations

from typing import Any

from service.app.commands import Accepted, KeyReused, Policy, Rejected, Replayed, Result
from service.domain import Rejection
from service.schemas.errors import message_style
from service.schemas.problems import problem

# the titles of the domain's rejections (the type is PROBLEM_BASE + the title's slug)
_REJECTION_TITLES = {404: "Not Found", 409: "Conflict", 422: "Unprocessable Content"}


def rejection_problem(rejection: Rejection) -> dict[str, Any]:
    errors = [{"loc": list(rejection.loc), "msg": message_style(rejection.detail)}] if rejection.loc else None
    return problem(rejection.status, rejection.detail,
                   title=_REJECTION_TITLES.get(rejection.status, rejection.reason), errors=errors)


def answer(result: Result) -> tuple[int, dict[str, Any]]:
    """201 for a recorded submission, 200 for any other accepted command (and every dry run),
    the rejection's 404/409/422, 409 for a reused key, a replay's stored status."""
    if isinstance(result, Accepted):
        return (201 if result.created else 200), result.body
    if isinstance(result, Rejected):
        return result.rejection.status, rejection_problem(result.rejection)
    if isinstance(result, KeyReused):
        return 409, problem(409, "this Idempotency-Key was used for a different request",
                            title="Idempotency key reused")
    assert isinstance(result, Replayed)
    return result.status, result.body


# HTTP: a state rejection is answered and not recorded; an accepted command answers its view
HTTP_POLICY = Policy(record_rejections=False, views=True, stored_answer=answer)
