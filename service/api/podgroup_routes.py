"""The PodGroup objects' routes (lifecycle.md *PodGroup objects*): create, get, list, delete. As thin
as the workloads' routes (routes.py), through the same `execute` and the command registry."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import Request, Response, Router, delete, get, post
from litestar.params import QueryParameter

from service.api import auth
from service.api import routes as r
from service.api.responses import json_response
from service.api.segments import route_name_errors, segment_errors
from service.app.commands import Command
from service.schemas.errors import InputValidationError
from service.schemas.names import DNS1123_LABEL_PATTERN, dns1123_label_error

PodGroupPhase = Literal["Pending", "Scheduled", "Completed", "Finished"]


async def create_podgroup(request: Request[Any, Any, Any], cluster: r.ClusterSegment, namespace: r.NamespaceSegment,
                          dry_run: r.DryRun = None) -> Response[Any]:
    path_errors = segment_errors(("cluster", cluster, "cluster"), ("namespace", namespace, "namespace"))

    def command(body: dict[str, Any] | None) -> Command:
        assert body is not None
        return Command(cluster=cluster, type="CreatePodGroup", name=body["name"], namespace=namespace, body=body)

    return await r.execute(request, command, body_kind="PodGroupObject", body_namespace=namespace, dry_run=dry_run,
                           path_errors=path_errors,
                           location=lambda c: f"/v1/clusters/{cluster}/namespaces/{namespace}/podgroups/{c.name}")


async def get_podgroup(request: Request[Any, Any, Any], cluster: r.ClusterSegment, namespace: r.NamespaceSegment,
                       name: r.WorkloadSegment) -> Response[Any]:
    r.check_segments(("cluster", cluster, "cluster"), ("namespace", namespace, "namespace"), ("name", name, "workload"))
    view = await r.service_of(request).queries.get_podgroup(cluster, namespace, name)
    if view is None:
        return r.not_found(f"PodGroup {namespace}/{name} was never created in cluster {cluster!r}")
    return json_response(view)


async def delete_podgroup(request: Request[Any, Any, Any], cluster: r.ClusterSegment, namespace: r.NamespaceSegment,
                          name: r.WorkloadSegment, dry_run: r.DryRun = None) -> Response[Any]:
    path_errors = segment_errors(("cluster", cluster, "cluster"), ("namespace", namespace, "namespace"),
                                 ("name", name, "workload"))
    return await r.execute(request, lambda _: Command(cluster=cluster, type="DeletePodGroup", name=name,
                                                      namespace=namespace), dry_run=dry_run, path_errors=path_errors)


async def list_podgroups(
    request: Request[Any, Any, Any], cluster: r.ClusterSegment,
    namespace: Annotated[str | None, QueryParameter(name="namespace", description="Only this namespace.",
                                                    schema_extra={"pattern": DNS1123_LABEL_PATTERN})] = None,
    workload: Annotated[str | None, QueryParameter(name="workload", description="Only this workload's.",
                                                   schema_extra={"pattern": DNS1123_LABEL_PATTERN})] = None,
    phase: Annotated[PodGroupPhase | None, QueryParameter(name="phase", description="Only in this phase.")] = None,
    limit: Annotated[int, QueryParameter(name="limit", ge=1, le=1000, description="Page size.")] = 100,
    after: Annotated[int, QueryParameter(name="after", ge=0, le=r.MAX_POSITION, schema_extra=r.POSITION,
                                         description="The `next` of the previous page.")] = 0,
) -> Response[Any]:
    errors = route_name_errors(request.scope, None)
    for param, value in (("namespace", namespace), ("workload", workload)):
        if value is not None and (reason := dns1123_label_error(value)) is not None:
            errors.append({"loc": ["query", param], "msg": reason})
    if errors:
        raise InputValidationError(errors)
    page = await r.service_of(request).queries.list_podgroups(cluster, namespace=namespace, workload=workload,
                                                              phase=phase, limit=limit, after=after)
    return json_response(page)


def podgroup_router() -> Router:
    """Fresh handler objects on every call (see routes.cluster_router), under the cluster's path."""
    tags = ["podgroups"]
    one = "/namespaces/{namespace:str}/podgroups/{name:str}"
    handlers: list[Any] = [
        post("/namespaces/{namespace:str}/podgroups", operation_id="createPodGroup",
             summary="Create a PodGroup object from its workload's template", tags=tags, status_code=201,
             opt={"access": auth.WORKLOADS_WRITE, "body": "PodGroupObject"})(create_podgroup),
        get(one, operation_id="getPodGroup", summary="Get a PodGroup object (also after deletion)", tags=tags,
            opt={"access": auth.WORKLOADS_READ})(get_podgroup),
        delete(one, operation_id="deletePodGroup", summary="Delete a PodGroup object", tags=tags, status_code=200,
               opt={"access": auth.WORKLOADS_WRITE})(delete_podgroup),
        get("/podgroups", operation_id="listPodGroups", summary="A page of PodGroup objects, in creation order",
            tags=tags, opt={"access": auth.WORKLOADS_LIST})(list_podgroups),
    ]
    return Router(path="/v1/clusters/{cluster:str}", route_handlers=[*r.options_handlers(handlers), *handlers])
