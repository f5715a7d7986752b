"""HTTP metrics beyond the shared ones of service.metrics (same registry, same /metrics)."""
from __future__ import annotations

from prometheus_client import Histogram
from prometheus_client.exposition import choose_encoder

from service.metrics import REGISTRY

UNMATCHED_ROUTE = "unmatched"  # the route label of requests no route matched (404)

HTTP_REQUEST_DURATION = Histogram(
    "gangplank_http_request_duration_seconds", "Time to answer an HTTP request routed to a handler",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)


def render(accept: str | None = None) -> tuple[bytes, str]:
    """The exposition of service.metrics.REGISTRY in the format the scraper accepts
    (Prometheus text, or OpenMetrics when asked for), and its content type."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(REGISTRY), content_type
