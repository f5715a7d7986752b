"""Route handlers of http.md. Thin: validate → Submission → the application's rooms → Response
(service/api/answers.py turns results into statuses and documents)."""
from __future__ import annotations

import hashlib
import importlib.metadata
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal

from litestar import Request, Response, Router, delete, get, post, put, route
from litestar.enums import HttpMethod
from litestar.handlers import HTTPRouteHandler
from litestar.params import PathParameter, QueryParameter

from service.api import auth
from service.api.answers import HTTP_POLICY, answer
from service.api.auth import principal_of
from service.api.metrics import render as render_metrics
from service.api.responses import (
    is_json_media_type,
    json_response,
    problem_response,
    sorted_json_response,
    unsupported_media_type,
)
from service.api.segments import route_name_errors, segment_errors
from service.app.audit import StreamContentError
from service.app.commands import Command, Origin, Replayed, Result, Submission
from service.app.registry import COMMANDS, CommandSpec
from service.app.service import Gangplank
from service.app.verify import NewerRules
from service.app.whatif import WhatIfInvalid, WhatIfUnfoldable
from service.clock import utc_now
from service.domain.model.rules import RULES
from service.schemas import problems
from service.schemas.envelope import idempotency_key_error
from service.schemas.errors import InputValidationError
from service.schemas.names import (
    CLUSTER_PATTERN,
    DNS1123_LABEL_PATTERN,
    DNS1123_SUBDOMAIN_PATTERN,
)
from service.schemas.problems import PROBLEM_CONTENT_TYPE, problem
from service.schemas.validate import parse_json, validate_body
from service.schemas.whatif import parse_changes
from service.store.base import canonical_json

IDEMPOTENCY_KEY = "Idempotency-Key"
MAX_POSITION = 2**63 - 1  # positions are BIGINTs in the store
# a position's bounds as integers in the OpenAPI document (Litestar writes `ge`/`le` as floats, and
# drops them from an optional parameter's schema)
POSITION: dict[str, Any] = {"minimum": 0, "maximum": MAX_POSITION}
REPLAYED_HEADER = "Idempotent-Replayed"
STATE_KEY = "gangplank"
try:
    PACKAGE_VERSION = importlib.metadata.version("gangplank")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a tree never installed
    PACKAGE_VERSION = "0+unknown"

ClusterSegment = Annotated[str, PathParameter(description="Cluster name.",
                                          schema_extra={"pattern": CLUSTER_PATTERN, "max_length": 63})]
NamespaceSegment = Annotated[str, PathParameter(description="Namespace (DNS-1123 label).",
                                            schema_extra={"pattern": DNS1123_LABEL_PATTERN, "max_length": 63})]
WorkloadSegment = Annotated[str, PathParameter(description="Workload name (DNS-1123 label).",
                                           schema_extra={"pattern": DNS1123_LABEL_PATTERN, "max_length": 63})]
ObjectSegment = Annotated[str, PathParameter(description="Object name (DNS-1123 subdomain).",
                                         schema_extra={"pattern": DNS1123_SUBDOMAIN_PATTERN, "max_length": 253})]

# `?dryRun=true` (http.md); also Kubernetes' own spelling, `?dryRun=All` (what `kubectl --dry-run=server`
# sends), on every mutating route: the answer that would result, nothing recorded.
DryRun = Annotated[str | None, QueryParameter(
    name="dryRun", description="`true` (or Kubernetes' `All`): answer with what would result; record nothing.",
    schema_extra={"enum": ["true", "false", "All", "1", "0"]})]
# `?explain=true` on the event page and a history: the lines of `audit explain` beside the events
Explain = Annotated[bool, QueryParameter(
    name="explain", description="Add `explained`: each event in the words of `audit explain`.")]
_DRY_RUN_VALUES = {"true": True, "1": True, "all": True, "false": False, "0": False}


def dry_run_of(value: str | bool | None) -> tuple[bool, list[dict[str, Any]]]:
    if value is None or isinstance(value, bool):
        return bool(value), []
    if (flag := _DRY_RUN_VALUES.get(value.lower())) is None:
        return False, [{"loc": ["query", "dryRun"], "msg": "must be true, false or All"}]
    return flag, []


def service_of(request: Request[Any, Any, Any]) -> Gangplank:
    service: Gangplank = request.app.state[STATE_KEY]
    return service


def check_segments(*segments: tuple[str, str, str]) -> None:
    """A 422 naming every bad segment (reads: there is no body to check with them)."""
    if errors := segment_errors(*segments):
        raise InputValidationError(errors)


def _idempotency_key(request: Request[Any, Any, Any]) -> tuple[str | None, list[dict[str, Any]]]:
    values = request.headers.getall(IDEMPOTENCY_KEY, [])
    if not values:
        return None, []
    if len(values) > 1:
        return None, [{"loc": ["header", IDEMPOTENCY_KEY], "msg": "must be given at most once"}]
    key = values[0]
    if (reason := idempotency_key_error(key)) is not None:
        return None, [{"loc": ["header", IDEMPOTENCY_KEY], "msg": reason}]
    return key, []


def fingerprint(method: str, raw_path: bytes, query_string: bytes, body: bytes) -> str:
    """sha256 over method, path (with query) and the body bytes: what makes a retry 'the same request'."""
    target = raw_path + (b"?" + query_string if query_string else b"")
    digest = hashlib.sha256()
    for part in (method.upper().encode("ascii"), target):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    digest.update(body)
    return digest.hexdigest()


def result_response(result: Result, *, location: str | None = None) -> Response[Any]:
    headers: dict[str, str] = {}
    if isinstance(result, Replayed):
        headers[REPLAYED_HEADER] = "true"
    status, body = answer(result)
    if status >= 400:
        document = dict(body)  # a stored answer may be a bare one: completed
        document.setdefault("title", problems.title_for(status))
        document.setdefault("type", problems.type_for(document["title"]))
        document["status"] = status
        document.setdefault("detail", document["title"])
        return sorted_json_response(document, status, headers, media_type=PROBLEM_CONTENT_TYPE)
    if status == 201 and location:
        headers["Location"] = location
    # keys sorted: a retry under the same Idempotency-Key answers the very same bytes
    return sorted_json_response(body, status, headers)


async def execute(request: Request[Any, Any, Any], command_for: Callable[[dict[str, Any] | None], Command], *,
                  body_kind: str | None = None, body_name: str | None = None, body_namespace: str | None = None,
                  dry_run: str | bool | None = None, location: Callable[[Command], str] | None = None,
                  path_errors: list[dict[str, Any]] | None = None) -> Response[Any]:
    """Read and validate (path, dryRun, Idempotency-Key, body: every error named in one answer), run
    one command, answer with its result."""
    # read on every route, also where nothing is parsed (DELETE): a body over the limit is a 413 whatever
    # it holds (Content-Length is checked before anything is read, streamed bytes are counted)
    raw = await request.body()
    content_type = request.headers.get("content-type")
    if body_kind is not None and not is_json_media_type(content_type):
        assert content_type is not None
        return unsupported_media_type(content_type)  # before validation: nothing is read as JSON
    dry, dry_run_errors = dry_run_of(dry_run)
    key, errors = _idempotency_key(request)
    errors = [*(path_errors or ()), *dry_run_errors, *errors]
    body: dict[str, Any] | None = None
    if body_kind is not None:
        try:
            body = validate_body(body_kind, raw, name=body_name, namespace=body_namespace)
        except InputValidationError as exc:
            errors = [*errors, *exc.errors]
    if errors:
        raise InputValidationError(errors)
    command = command_for(body)
    origin = Origin(source="http", actor=principal_of(request).actor, command_id=key or str(uuid.uuid4()),
                    received_at=utc_now())
    scope = request.scope
    request_fingerprint = fingerprint(request.method, scope.get("raw_path") or scope["path"].encode("utf-8"),
                         scope.get("query_string", b""), raw)
    submission = Submission(command, origin, idempotency_key=None if dry else key,
                            fingerprint=None if dry or key is None else request_fingerprint)
    result = await service_of(request).commands.execute(submission, HTTP_POLICY, dry_run=dry)
    return result_response(result, location=location(command) if location else None)


def not_found(detail: str) -> Response[Any]:
    return problem_response(problem(404, detail, type=problems.NOT_FOUND))


# -- inventory ----------------------------------------------------------------------------------

def _inventory() -> list[tuple[CommandSpec, CommandSpec | None]]:
    """Each inventory collection of the command registry: (its upsert, its removal or None)."""
    upserts = {s.collection: s for s in COMMANDS.values()
               if not s.for_workload and s.body is not None and s.collection != SCHEDULER}
    removals = {s.collection: s for s in COMMANDS.values() if not s.for_workload and s.body is None}
    return [(upsert, removals.get(collection)) for collection, upsert in upserts.items()]


def _inventory_handlers(upsert_spec: CommandSpec, remove_spec: CommandSpec | None) -> list[HTTPRouteHandler]:
    segment, noun, upsert = upsert_spec.collection, upsert_spec.noun, upsert_spec.type
    kind = upsert_spec.body
    assert kind is not None
    tags = ["inventory"]

    async def list_(request: Request[Any, Any, Any], cluster: ClusterSegment) -> Response[Any]:
        check_segments(("cluster", cluster, "cluster"))
        queries = service_of(request).queries
        items = await (queries.list_nodes(cluster) if segment == "nodes" else queries.list_objects(cluster, segment))
        return json_response({"items": items})

    async def get_(request: Request[Any, Any, Any], cluster: ClusterSegment, name: ObjectSegment) -> Response[Any]:
        check_segments(("cluster", cluster, "cluster"), ("name", name, "object"))
        queries = service_of(request).queries
        view = await (queries.get_node(cluster, name) if segment == "nodes"
                      else queries.get_object(cluster, segment, name))
        if view is None:
            return not_found(f"{noun} {name!r} not found in cluster {cluster!r}")
        return json_response(view)

    async def put_(request: Request[Any, Any, Any], cluster: ClusterSegment, name: ObjectSegment,
                   dry_run: DryRun = None) -> Response[Any]:
        path_errors = segment_errors(("cluster", cluster, "cluster"), ("name", name, "object"))
        return await execute(request, lambda body: Command(cluster=cluster, type=upsert, name=name, body=body),
                             body_kind=kind, body_name=name, dry_run=dry_run, path_errors=path_errors)

    async def delete_(request: Request[Any, Any, Any], cluster: ClusterSegment, name: ObjectSegment,
                      dry_run: DryRun = None) -> Response[Any]:
        assert remove_spec is not None
        remove = remove_spec.type
        path_errors = segment_errors(("cluster", cluster, "cluster"), ("name", name, "object"))
        return await execute(request, lambda _: Command(cluster=cluster, type=remove, name=name),
                             dry_run=dry_run, path_errors=path_errors)

    handlers = [
        get(f"/{segment}", operation_id=f"list{kind}s", summary=f"List the {noun}s", tags=tags,
            opt={"access": auth.INVENTORY_READ})(list_),
        get(f"/{segment}/{{name:str}}", operation_id=f"get{kind}", summary=f"Get a {noun}", tags=tags,
            opt={"access": auth.INVENTORY_READ})(get_),
        put(f"/{segment}/{{name:str}}", operation_id=f"put{kind}", summary=f"Create or replace a {noun}", tags=tags,
            opt={"access": auth.INVENTORY_WRITE, "body": kind})(put_),
    ]
    if remove_spec is not None:
        handlers.append(delete(f"/{segment}/{{name:str}}", operation_id=f"delete{kind}", summary=f"Remove a {noun}",
                               tags=tags, status_code=200, opt={"access": auth.INVENTORY_WRITE})(delete_))
    return handlers


# -- the scheduler configuration (sharing.md) -----------------------------------------------------

SCHEDULER = "scheduler"


async def put_scheduler(request: Request[Any, Any, Any], cluster: ClusterSegment, dry_run: DryRun = None) -> Response[Any]:
    path_errors = segment_errors(("cluster", cluster, "cluster"))
    return await execute(request, lambda body: Command(cluster=cluster, type="ConfigureScheduler", name=SCHEDULER,
                                                       body=body),
                         body_kind="SchedulerConfiguration", dry_run=dry_run, path_errors=path_errors)


async def get_scheduler(request: Request[Any, Any, Any], cluster: ClusterSegment) -> Response[Any]:
    check_segments(("cluster", cluster, "cluster"))
    return json_response(await service_of(request).queries.scheduler(cluster))


# -- workloads ----------------------------------------------------------------------------------

Phase = Literal["Pending", "Scheduled", "Completed", "Finished"]


async def submit_workload(
    request: Request[Any, Any, Any], cluster: ClusterSegment, namespace: NamespaceSegment,
    dry_run: DryRun = None,
) -> Response[Any]:
    path_errors = segment_errors(("cluster", cluster, "cluster"), ("namespace", namespace, "namespace"))

    def command(body: dict[str, Any] | None) -> Command:
        assert body is not None
        return Command(cluster=cluster, type="SubmitWorkload", name=body["name"], namespace=namespace, body=body)

    return await execute(request, command, body_kind="Workload", body_namespace=namespace, dry_run=dry_run,
                         path_errors=path_errors,
                         location=lambda c: f"/v1/clusters/{cluster}/namespaces/{namespace}/workloads/{c.name}")


# `?position=N` on a workload's GETs: the incarnation of the name submitted at N (lifecycle.md)
IncarnationQuery = Annotated[int | None, QueryParameter(
    name="position", ge=1, le=MAX_POSITION,
    description="The incarnation of the name submitted at this position (default: the latest).")]


def _never(cluster: str, namespace: str, name: str, position: int | None) -> Response[Any]:
    if position is not None:
        return not_found(f"workload {namespace}/{name} has no incarnation submitted at position {position} "
                         f"in cluster {cluster!r}")
    return not_found(f"workload {namespace}/{name} was never submitted to cluster {cluster!r}")


async def get_workload(request: Request[Any, Any, Any], cluster: ClusterSegment, namespace: NamespaceSegment,
                       name: WorkloadSegment, position: IncarnationQuery = None) -> Response[Any]:
    check_segments(("cluster", cluster, "cluster"), ("namespace", namespace, "namespace"), ("name", name, "workload"))
    view = await service_of(request).queries.get_workload(cluster, namespace, name, position)
    if view is None:
        return _never(cluster, namespace, name, position)
    return json_response(view)


async def delete_workload(request: Request[Any, Any, Any], cluster: ClusterSegment, namespace: NamespaceSegment,
                          name: WorkloadSegment, dry_run: DryRun = None) -> Response[Any]:
    path_errors = segment_errors(("cluster", cluster, "cluster"), ("namespace", namespace, "namespace"),
                                 ("name", name, "workload"))
    return await execute(request, lambda _: Command(cluster=cluster, type="DeleteWorkload", name=name,
                                                    namespace=namespace), dry_run=dry_run, path_errors=path_errors)


def _workload_command(type_: str, body_kind: str) -> Callable[..., Any]:
    """A command addressed to a live workload with a body (podstatus, scale: lifecycle.md)."""
    async def handler(request: Request[Any, Any, Any], cluster: ClusterSegment, namespace: NamespaceSegment,
                      name: WorkloadSegment, dry_run: DryRun = None) -> Response[Any]:
        path_errors = segment_errors(("cluster", cluster, "cluster"), ("namespace", namespace, "namespace"),
                                     ("name", name, "workload"))
        return await execute(request, lambda body: Command(cluster=cluster, type=type_, name=name,
                                                           namespace=namespace, body=body),
                             body_kind=body_kind, dry_run=dry_run, path_errors=path_errors)
    handler.__name__ = f"{type_[0].lower()}{type_[1:]}"
    return handler


async def workload_history(request: Request[Any, Any, Any], cluster: ClusterSegment, namespace: NamespaceSegment,
                           name: WorkloadSegment, explain: Explain = False,
                           position: IncarnationQuery = None) -> Response[Any]:
    check_segments(("cluster", cluster, "cluster"), ("namespace", namespace, "namespace"), ("name", name, "workload"))
    history = await service_of(request).queries.history(cluster, namespace, name, position)
    if history is None:
        return _never(cluster, namespace, name, position)
    if explain:  # the lines of `audit explain` beside the events as stored (service/app/summaries.py)
        history["explained"] = await service_of(request).summaries.history(cluster, namespace, name,
                                                                           history["events"])
    return json_response(history)


async def list_workloads(
    request: Request[Any, Any, Any], cluster: ClusterSegment,
    namespace: Annotated[str | None, QueryParameter(name="namespace", description="Only this namespace.",
                                               schema_extra={"pattern": DNS1123_LABEL_PATTERN})] = None,
    phase: Annotated[Phase | None, QueryParameter(name="phase", description="Only workloads in this phase.")] = None,
    limit: Annotated[int, QueryParameter(name="limit", ge=1, le=1000, description="Page size.")] = 100,
    after: Annotated[int, QueryParameter(name="after", ge=0, le=MAX_POSITION, schema_extra=POSITION,
                                                     description="The `next` of the previous page.")] = 0,
) -> Response[Any]:
    if errors := route_name_errors(request.scope, namespace):
        raise InputValidationError(errors)
    page = await service_of(request).queries.list_workloads(cluster, namespace=namespace, phase=phase, limit=limit,
                                                    after=after)
    return json_response(page)


async def list_namespace_workloads(
    request: Request[Any, Any, Any], cluster: ClusterSegment, namespace: NamespaceSegment,
    phase: Annotated[Phase | None, QueryParameter(name="phase", description="Only workloads in this phase.")] = None,
    limit: Annotated[int, QueryParameter(name="limit", ge=1, le=1000, description="Page size.")] = 100,
    after: Annotated[int, QueryParameter(name="after", ge=0, le=MAX_POSITION, schema_extra=POSITION,
                                         description="The `next` of the previous page.")] = 0,
) -> Response[Any]:
    """The Kubernetes path of a namespace's list (`kubectl get workloads -n team-a`): the same page as
    `GET /workloads?namespace=`."""
    check_segments(("cluster", cluster, "cluster"), ("namespace", namespace, "namespace"))
    page = await service_of(request).queries.list_workloads(cluster, namespace=namespace, phase=phase, limit=limit,
                                                    after=after)
    return json_response(page)


# -- audit and replay ---------------------------------------------------------------------------

async def events(
    request: Request[Any, Any, Any], cluster: ClusterSegment,
    after: Annotated[int, QueryParameter(name="after", ge=0, le=MAX_POSITION, schema_extra=POSITION,
                                                     description="Events after this position.")] = 0,
    limit: Annotated[int, QueryParameter(name="limit", ge=1, le=1000, description="At most this many events.")] = 100,
    wait: Annotated[float, QueryParameter(name="wait", ge=0, le=30,
                                     description="Seconds to wait for the first new event.")] = 0,
    explain: Explain = False,
) -> Response[Any]:
    check_segments(("cluster", cluster, "cluster"))
    page = await service_of(request).queries.events(cluster, after=after, limit=limit, wait=float(wait))
    if explain:  # the events as stored, and beside them their words (service/app/summaries.py)
        page["explained"] = await service_of(request).summaries.page(cluster, page["events"])
    return json_response(page)


async def state_at(
    request: Request[Any, Any, Any], cluster: ClusterSegment,
    at: Annotated[int | None, QueryParameter(name="at", ge=0, le=MAX_POSITION, schema_extra=POSITION,
                                                          description="A position; default: now.")] = None,
    include_finished: Annotated[bool, QueryParameter(
        name="includeFinished", description="Also list workloads finished by then.")] = False,
) -> Response[Any]:
    check_segments(("cluster", cluster, "cluster"))
    return json_response(await service_of(request).queries.state_at(cluster, at, include_finished=include_finished))


async def verify(request: Request[Any, Any, Any], cluster: ClusterSegment) -> Response[Any]:
    check_segments(("cluster", cluster, "cluster"))
    return json_response(await service_of(request).queries.verify(cluster))


async def checkpoints(request: Request[Any, Any, Any], cluster: ClusterSegment) -> Response[Any]:
    check_segments(("cluster", cluster, "cluster"))
    return json_response(await service_of(request).queries.checkpoints(cluster))


async def replay_verify(
    request: Request[Any, Any, Any], cluster: ClusterSegment,
    until: Annotated[int | None, QueryParameter(name="until", ge=0, le=MAX_POSITION, schema_extra=POSITION,
                                                description="Re-decide up to this position; default: all.")] = None,
) -> Response[Any]:
    """GET /audit/replay (audit.md): the report of replay --verify, from the store; records nothing."""
    check_segments(("cluster", cluster, "cluster"))
    try:
        report = await service_of(request).queries.replay_report(cluster, until)
    except NewerRules as exc:
        return problem_response(problem(409, str(exc), position=exc.position,
                                        rules={"current": RULES, "recorded": exc.recorded}))
    except StreamContentError as exc:  # a record this code did not write, although its chain holds
        return problem_response(problem(409, str(exc), position=exc.position))
    if report is None:
        return not_found(f"cluster {cluster!r} has no events")
    return json_response(report)


async def what_if(request: Request[Any, Any, Any], cluster: ClusterSegment) -> Response[Any]:
    """POST /audit/what-if (audit.md): re-decide the recorded stream under the changes; records nothing."""
    check_segments(("cluster", cluster, "cluster"))
    raw = await request.body()
    content_type = request.headers.get("content-type")
    if not is_json_media_type(content_type):
        assert content_type is not None
        return unsupported_media_type(content_type)
    try:
        changes = parse_changes(parse_json(raw, loc=()))  # located from the document's root, then in "body"
    except InputValidationError as exc:
        raise InputValidationError([{**e, "loc": ["body", *e["loc"]]} for e in exc.errors]) from exc
    try:
        report = await service_of(request).queries.what_if(cluster, changes)
    except WhatIfInvalid as exc:
        raise InputValidationError.single(["body", *exc.loc], exc.msg) from exc
    except WhatIfUnfoldable as exc:  # a record this code did not write: as GET /audit/replay answers it
        return problem_response(problem(409, str(exc), position=exc.position))
    if report is None:
        return not_found(f"cluster {cluster!r} has no events")
    # the document of `replay --what-if --output json`, byte for byte: canonical JSON and a newline
    return Response(content=(canonical_json(report) + "\n").encode("ascii"), media_type="application/json")


def cluster_router() -> Router:
    """Fresh handler objects on every call: Litestar caches per-app resolutions (guards…) on handlers."""
    workloads, audit = ["workloads"], ["audit"]
    handlers: list[Any] = [
        post("/namespaces/{namespace:str}/workloads", operation_id="submitWorkload", summary="Submit a workload",
             tags=workloads, status_code=201, opt={"access": auth.WORKLOADS_WRITE, "body": "Workload"})(submit_workload),
        get("/namespaces/{namespace:str}/workloads", operation_id="listNamespaceWorkloads",
            summary="A page of a namespace's workload views, in submission order", tags=workloads,
            opt={"access": auth.WORKLOADS_READ})(list_namespace_workloads),
        get("/namespaces/{namespace:str}/workloads/{name:str}", operation_id="getWorkload",
            summary="Get a workload", tags=workloads, opt={"access": auth.WORKLOADS_READ})(get_workload),
        delete("/namespaces/{namespace:str}/workloads/{name:str}", operation_id="deleteWorkload",
               summary="Delete a workload (finished or cancelled)", tags=workloads, status_code=200,
               opt={"access": auth.WORKLOADS_WRITE})(delete_workload),
        post("/namespaces/{namespace:str}/workloads/{name:str}/podstatus", operation_id="reportPodStatus",
             summary="Report finished pods (Succeeded or Failed)", tags=workloads, status_code=200,
             opt={"access": auth.WORKLOADS_WRITE, "body": "PodStatusReport"})(_workload_command("FinishPods", "PodStatusReport")),
        post("/namespaces/{namespace:str}/workloads/{name:str}/scale", operation_id="scaleWorkload",
             summary="Change a live workload's sizes (pod counts, minCount, stamped copies, minGroupCount)",
             tags=workloads, status_code=200,
             opt={"access": auth.WORKLOADS_WRITE, "body": "Scale"})(_workload_command("ScaleWorkload", "Scale")),
        get("/namespaces/{namespace:str}/workloads/{name:str}/history", operation_id="getWorkloadHistory",
            summary="Every event about a workload", tags=audit, opt={"access": auth.WORKLOADS_READ})(workload_history),
        get("/workloads", operation_id="listWorkloads", summary="A page of workload views, in submission order",
            tags=workloads, opt={"access": auth.WORKLOADS_LIST})(list_workloads),
        get("/events", operation_id="listEvents", summary="The cluster's events after a position (long poll)",
            tags=audit, opt={"access": auth.AUDIT})(events),
        get("/state", operation_id="getState", summary="The cluster as it stood after event N", tags=audit,
            opt={"access": auth.AUDIT})(state_at),
        get("/audit/verify", operation_id="verifyChain", summary="Check the cluster's hash chain", tags=audit,
            opt={"access": auth.AUDIT})(verify),
        get("/audit/checkpoints", operation_id="listCheckpoints", summary="The cluster's signed checkpoints",
            tags=audit, opt={"access": auth.AUDIT})(checkpoints),
        get("/audit/replay", operation_id="replayVerify", summary="Re-decide the recorded stream and say the "
            "verdict (replay --verify)", tags=audit, opt={"access": auth.AUDIT})(replay_verify),
        post("/audit/what-if", operation_id="whatIf", summary="Re-decide the stream under changes (records nothing)",
             tags=audit, status_code=200,
             opt={"access": auth.AUDIT, "body": "WhatIfChanges", "records": False})(what_if),
    ]
    handlers += [
        put("/scheduler", operation_id="putScheduler", summary="Configure the cluster's scheduler (scoring strategy)",
            tags=["inventory"], status_code=200, opt={"access": auth.INVENTORY_WRITE, "body": "SchedulerConfiguration"})(
            put_scheduler),
        get("/scheduler", operation_id="getScheduler", summary="The cluster's scheduler configuration",
            tags=["inventory"], opt={"access": auth.INVENTORY_READ})(get_scheduler),
    ]
    for upsert, remove in _inventory():
        handlers.extend(_inventory_handlers(upsert, remove))
    return Router(path="/v1/clusters/{cluster:str}", route_handlers=[*options_handlers(handlers), *handlers])


def options_handlers(handlers: list[Any]) -> list[HTTPRouteHandler]:
    """One OPTIONS handler per path, whose `Allow` names every method of the path. (Litestar makes its
    own from the first handler registered on a path only, so a path of several handlers, such as
    PUT, GET and DELETE /nodes/{name}, would list one of them.)"""
    methods: dict[str, set[str]] = {}
    for handler in handlers:
        if isinstance(handler, HTTPRouteHandler):
            for path in handler.paths:
                methods.setdefault(path, {"OPTIONS"}).update(handler.http_methods)

    def answer(allow: str) -> Callable[[], Any]:
        async def options() -> Response[Any]:
            return Response(content=None, status_code=204, headers={"Allow": allow}, media_type="text/plain")
        return options

    return [route(path, http_method=[HttpMethod.OPTIONS], include_in_schema=False,
                  opt={"access": auth.PUBLIC})(answer(", ".join(sorted(allowed))))
            for path, allowed in methods.items()]


# -- cluster list and operations ----------------------------------------------------------------

async def list_clusters(request: Request[Any, Any, Any]) -> Response[Any]:
    return json_response({"items": await service_of(request).queries.clusters()})


async def healthz() -> Response[Any]:
    return json_response({"status": "ok"})


async def version() -> Response[Any]:
    return json_response({"version": PACKAGE_VERSION, "api": "v1", "rules": RULES})


async def readyz(request: Request[Any, Any, Any]) -> Response[Any]:
    try:
        ready, checks = await service_of(request).queries.readiness()
    except Exception as exc:  # a failing check is "not ready", never a 500
        return problem_response(problem(503, f"readiness check failed: {type(exc).__name__}", type=problems.NOT_READY))
    if ready:
        return json_response({"status": "ready", "checks": checks})
    return problem_response(problem(503, "not ready", type=problems.NOT_READY, checks=checks))


async def metrics(request: Request[Any, Any, Any]) -> Response[Any]:
    body, content_type = render_metrics(request.headers.get("accept"))
    return Response(content=body, headers={"Content-Type": content_type})


def route_handlers() -> list[Any]:
    operations = ["operations"]
    handlers = [
        cluster_router(),
        get("/v1/clusters", operation_id="listClusters", summary="The clusters with their last positions",
            tags=["audit"], opt={"access": auth.CLUSTERS})(list_clusters),
        get("/healthz", operation_id="healthz", summary="The process answers", tags=operations,
            opt={"access": auth.PUBLIC})(healthz),
        get("/version", operation_id="version", summary="The service's version and API version", tags=operations,
            opt={"access": auth.PUBLIC})(version),
        get("/readyz", operation_id="readyz", summary="Ready to serve (database, schema, Kafka consumer)",
            tags=operations, opt={"access": auth.PUBLIC})(readyz),
        get("/metrics", operation_id="metrics", summary="Prometheus metrics", tags=operations,
            opt={"access": auth.PUBLIC}, media_type="text/plain")(metrics),
    ]
    return [*options_handlers(handlers), *handlers]
