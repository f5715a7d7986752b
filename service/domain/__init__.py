"""The decider: a pure functional core (no I/O, clock, randomness or logging)."""
from service.domain.decider import Rejection, accept, decide, handle, rejection_event
from service.domain.events import Event
from service.domain.evolve import evolve
from service.domain.state import ClusterState

__all__ = ["ClusterState", "Event", "Rejection", "accept", "decide", "evolve", "handle", "rejection_event"]
