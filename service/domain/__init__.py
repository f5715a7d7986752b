"""The decider: a pure functional core (no I/O, clock, randomness or logging)."""
from service.domain.commands import Rejection, accept, rejection_event
from service.domain.decider import decide, handle
from service.domain.events import Event
from service.domain.evolve import evolve
from service.domain.state import ClusterState

__all__ = ["ClusterState", "Event", "Rejection", "accept", "decide", "evolve", "handle", "rejection_event"]
