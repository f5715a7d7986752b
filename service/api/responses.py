"""Responses and exception handlers: every error is RFC 9457 problem details."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args, get_origin

import msgspec
import structlog
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.exceptions.http_exceptions import (
    MethodNotAllowedException,
    NotAuthorizedException,
    NotFoundException,
    PermissionDeniedException,
)

from service.api.auth import WWW_AUTHENTICATE
from service.api.metrics import UNMATCHED_ROUTE
from service.api.segments import route_name_errors
from service.metrics import REQUESTS
from service.schemas import problems
from service.schemas.errors import InputValidationError, from_msgspec, message_style
from service.schemas.problems import PROBLEM_CONTENT_TYPE, problem, validation_problem

log = structlog.get_logger("gangplank.api")

JSON = "application/json"


def json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response[Any]:
    return Response(content=body, status_code=status, media_type=JSON, headers=dict(headers or {}))


_SORTED = msgspec.json.Encoder(order="sorted")


def sorted_json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None,
                         media_type: str = JSON) -> Response[Any]:
    """A JSON answer with every object's keys sorted: the answer to a command, whose retry under
    the same Idempotency-Key must give the same bytes (the stored answer comes back from the
    store with its keys in another order)."""
    return Response(content=_SORTED.encode(body), status_code=status, media_type=media_type,
                    headers=dict(headers or {}))


def problem_response(document: dict[str, Any], headers: Mapping[str, str] | None = None) -> Response[Any]:
    return Response(content=document, status_code=int(document["status"]), media_type=PROBLEM_CONTENT_TYPE,
                    headers=dict(headers or {}))


_TYPES = {
    401: problems.UNAUTHORIZED,
    403: problems.FORBIDDEN,
    404: problems.NOT_FOUND,
    405: problems.METHOD_NOT_ALLOWED,
    413: problems.TOO_LARGE,
}


def is_json_media_type(content_type: str | None) -> bool:
    """`application/json` or another `+json` type, with any parameters (`charset=utf-8`); no
    Content-Type at all reads as JSON, as the Kubernetes API server reads it."""
    if content_type is None or not content_type.strip():
        return True
    media_type = content_type.partition(";")[0].strip().lower()
    kind, slash, subtype = media_type.partition("/")
    return bool(kind) and bool(slash) and (media_type == JSON or (subtype.endswith("+json") and subtype != "+json"))


def unsupported_media_type(content_type: str) -> Response[Any]:
    """415, the Kubernetes API server's answer to a body in a format it does not read."""
    return problem_response(problem(
        415, f"the body's Content-Type {content_type!r} is not JSON; accepted: application/json or another "
        "+json type (parameters such as charset=utf-8 allowed)"))  # type: .../unsupported-media-type


def size_text(size: int) -> str:
    """1048576 → "1 MiB" (the body limit as people write it)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} bytes"


def _wire_name(request: Request[Any, Any, Any], key: str) -> str:
    """The name a parameter has in the request (`dryRun`), not in Python (`dry_run`)."""
    try:
        field = request.route_handler.parsed_fn_signature.parameters.get(key)
        name = getattr(getattr(field, "kwarg_definition", None), "name", None)
    except Exception:  # no route (404) or no signature: keep the key
        return key
    return name if isinstance(name, str) and name else key


def _allowed_values(request: Request[Any, Any, Any], key: str) -> Sequence[Any]:
    """The values of a Literal parameter (`phase`), named in its error as pydantic names them."""
    try:
        annotation = request.route_handler.parsed_fn_signature.parameters[key].annotation
    except Exception:  # no route or no such parameter
        return ()
    for arg in (annotation, *get_args(annotation)):
        if get_origin(arg) is Literal:
            return get_args(arg)
    return ()


def _litestar_validation_errors(request: Request[Any, Any, Any], exc: ValidationException) -> list[dict[str, Any]]:
    """Litestar's parameter errors ({"message", "key", "source"}) as {"loc", "msg"}, the message in
    pydantic's words (Litestar's come from msgspec)."""
    errors = []
    extra = exc.extra if isinstance(exc.extra, list) else []
    for item in extra:
        if not isinstance(item, dict):
            continue
        source = item.get("source") or "request"
        source = str(getattr(source, "value", source))  # ParamType.QUERY → "query"
        key = item.get("key")
        loc = [source, _wire_name(request, str(key))] if key is not None else [source]
        allowed = _allowed_values(request, str(key)) if key is not None else ()
        errors.append({"loc": loc, "msg": from_msgspec(str(item.get("message") or "invalid value"), allowed)})
    return errors or [{"loc": ["request"], "msg": message_style(str(exc.detail))}]


COUNTED = "gangplank.counted"  # set in the scope by the route middleware, which counts the answer


def count_unrouted(request: Request[Any, Any, Any], status: int) -> None:
    """An answer given before the route middleware counted it (no route, method not allowed, access
    refused): counted here."""
    scope = request.scope
    if not scope.get(COUNTED):
        REQUESTS.labels(scope.get("method", ""), scope.get("path_template") or UNMATCHED_ROUTE, str(status)).inc()


AUTHORIZER_KEY = "gangplank.authorizer"


def handle_http_exception(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    if isinstance(exc, (NotFoundException, MethodNotAllowedException)) and not request.scope.get(COUNTED):
        # no route answered: access was not checked; without a valid token the answer is 401
        authorizer = request.app.state.get(AUTHORIZER_KEY)
        if authorizer is not None and not authorizer.authenticated(request):
            exc = NotAuthorizedException(detail="a valid bearer token is required", headers=WWW_AUTHENTICATE)
    response = _http_exception_response(request, exc)
    count_unrouted(request, response.status_code or 500)
    return response


def _http_exception_response(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    headers = dict(exc.headers or {})
    if isinstance(exc, ValidationException):
        errors = _litestar_validation_errors(request, exc)
        named = {tuple(e["loc"]) for e in errors}
        names = route_name_errors(request.scope, request.query_params.get("namespace"))
        errors = [{**e, "msg": message_style(e["msg"])} for e in names if tuple(e["loc"]) not in named] + errors
        return problem_response(validation_problem(errors), headers)
    status = exc.status_code
    if status == 500 and exc.detail == "client disconnected prematurely":
        # the client hung up while sending its body: nobody reads this answer, and it is not our failure
        log.info("api.client_disconnected", method=request.method, path=request.url.path)
        return problem_response(problem(400, "the client disconnected before sending the whole body"), headers)
    if isinstance(exc, NotFoundException) and exc.detail == "Not Found":
        detail = f"no route matches {request.url.path}"
    elif isinstance(exc, MethodNotAllowedException):
        detail = f"{request.method} is not allowed on {request.url.path}"
    elif status == 413:
        limit = getattr(request.app, "request_max_body_size", None)
        detail = (f"the request body is over the limit of {size_text(limit)}" if isinstance(limit, int)
                  else "the request body is over the size limit")
    elif isinstance(exc, (NotAuthorizedException, PermissionDeniedException)):
        detail = exc.detail
    else:
        detail = exc.detail
    if status >= 500:
        log.error("api.http_exception", status=status, detail=exc.detail, path=request.url.path)
    # RFC 9110 names 413 "Content Too Large" (Python's HTTPStatus still says "Request Entity Too Large")
    title = "Content Too Large" if status == 413 else None
    return problem_response(problem(status, detail, type=_TYPES.get(status), title=title), headers)


def handle_input_error(request: Request[Any, Any, Any], exc: InputValidationError) -> Response[Any]:
    return problem_response(exc.problem())


def _store_unavailable(exc: BaseException) -> bool:
    """The event store cannot be reached or has no schema (a database down, a connection lost,
    `serve --no-migrate` on an empty database, a pool timeout): nothing the caller did wrong.
    The store translates its driver's errors (StoreUnavailable); no driver type is known here."""
    from service.store.base import StoreUnavailable

    return isinstance(exc, (StoreUnavailable, ConnectionError, TimeoutError, OSError))


def handle_unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    response = _unexpected_response(request, exc)
    count_unrouted(request, response.status_code or 500)
    return response


def _unexpected_response(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    if _store_unavailable(exc):
        log.error("api.store_unavailable", method=request.method, path=request.url.path,
                  error=type(exc).__name__, detail=str(exc)[:500])
        return problem_response(problem(503, "the event store is unavailable; retry later (see /readyz)",
                                        type=problems.SERVICE_UNAVAILABLE), {"Retry-After": "1"})
    log.exception("api.unhandled", method=request.method, path=request.url.path, error=type(exc).__name__)
    return problem_response(problem(500, "the server failed to answer this request; it has been logged",
                                    type=problems.INTERNAL))


EXCEPTION_HANDLERS = {
    InputValidationError: handle_input_error,
    HTTPException: handle_http_exception,
    Exception: handle_unexpected,
}
