"""gangplank-client: a typed Python client for Gangplank (shared/spec/client.md).

    from gangplank_client import Client, WorkloadBuilder
    c = Client("http://127.0.0.1:8000", cluster="prod")
    v = c.submit("team-a", WorkloadBuilder("train-7").gang("workers", min_count=4)
                 .pods("worker", count=4, requests={"cpu": "8"}).build())
    for event in c.watch(after=v.position): ...
"""
from gangplank_client._http import RetryPolicy
from gangplank_client.builder import BuildError, WorkloadBuilder
from gangplank_client.client import DEFAULT_SERVER, AsyncClient, Client
from gangplank_client.errors import FieldError, ProblemError
from gangplank_client.models import (
    Event,
    EventPage,
    NodeView,
    PodGroupPage,
    PodGroupStatus,
    PodGroupView,
    WorkloadPage,
    WorkloadSpec,
    WorkloadView,
)

__all__ = ["AsyncClient", "BuildError", "Client", "DEFAULT_SERVER", "Event", "EventPage", "FieldError", "NodeView",
           "PodGroupPage", "PodGroupStatus", "PodGroupView", "ProblemError", "RetryPolicy", "WorkloadBuilder",
           "WorkloadPage", "WorkloadSpec",
           "WorkloadView"]
__version__ = "0.1.0"
