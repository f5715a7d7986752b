"""The decider: a pure functional core (no I/O, clock, randomness or logging)."""
from service.domain.decide.commands import Rejection, accept, rejection_event
from service.domain.decide.decider import decide, handle
from service.domain.fold.evolve import evolve
from service.domain.model.events import Event
from service.domain.state.cluster import ClusterState

__all__ = ["ClusterState", "Event", "Rejection", "accept", "decide", "evolve", "handle", "rejection_event"]
