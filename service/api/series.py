"""`GET /v1/clusters/{cluster}/series` (console.md, *Series*): the console's chart data, from the
store's snapshots and events (service/app/series.py). Auditor access, as every audit read."""
from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import QueryParameter

from service.api import auth
from service.api.responses import json_response
from service.api.routes import MAX_POSITION, ClusterSegment, check_segments, service_of
from service.app.series import DEFAULT_POINTS, MAX_POINTS, SeriesRange
from service.schemas.errors import InputValidationError

PATH = "/v1/clusters/{cluster:str}/series"


async def get_series(
    request: Request[Any, Any, Any], cluster: ClusterSegment,
    start: Annotated[int | None, QueryParameter(name="from", ge=0, le=MAX_POSITION,
                                                description="The first position; default 0.")] = None,
    end: Annotated[int | None, QueryParameter(name="to", ge=0, le=MAX_POSITION,
                                              description="The last position; default (and at most) the "
                                                          "cluster's last position.")] = None,
    points: Annotated[int, QueryParameter(name="points", ge=1, le=MAX_POINTS,
                                          description="At most this many points, spread evenly over "
                                                      "[from, to].")] = DEFAULT_POINTS,
) -> Response[Any]:
    check_segments(("cluster", cluster, "cluster"))
    try:
        document = await service_of(request).series.series(cluster, start, end, points)
    except SeriesRange as exc:
        raise InputValidationError.single(["query", exc.field], exc.message) from exc
    return json_response(document)


def series_handlers() -> list[Any]:
    """Fresh handler objects on every call (Litestar caches per-app resolutions on handlers)."""
    return [get(PATH, operation_id="getSeries", summary="The cluster's numbers over positions (the console's chart)",
                tags=["audit"], opt={"access": auth.AUDIT})(get_series)]
