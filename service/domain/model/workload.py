"""The live workloads and their pod groups: what the decider places, and what a finished
workload keeps (`Workload.compact`). No dependency on the cluster state, so that the device
code (dra/) and the queue can name them without importing state.py."""
from __future__ import annotations

import json
from array import array
from dataclasses import dataclass, field
from typing import Any

from service.domain.model import gang
from service.domain.model.composite import CpgSpec
from service.domain.model.specs import GroupSpec, WorkloadSpec, workload_from_submission

QueueKey = tuple[int, int, int]  # (-priority, submission position, group index)

# node_of values of pods that are not Running (lifecycle.md *Pod phases*): -1 Pending; finished pods
# keep a phase of their own and are never placed again
PENDING_POD = -1
SUCCEEDED_POD = -2
FAILED_POD = -3
FINISHED_PHASES = {SUCCEEDED_POD: "Succeeded", FAILED_POD: "Failed"}
PHASE_CODES = {"Succeeded": SUCCEEDED_POD, "Failed": FAILED_POD}


@dataclass(eq=False)
class Group:
    workload: Workload
    index: int
    spec: GroupSpec
    node_of: list[int]  # node row per pod, -1 when not placed
    placed_at: list[tuple[int, int] | None]  # (decision position, pod index in that decision)
    placed: int = 0
    domain: str | None = None  # topology value chosen while any pod is placed
    explanation: dict[str, Any] | None = None
    needs_explanation: bool = True  # no failed try recorded since it became pending
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)
    ever_scheduled: bool = False
    class_key: tuple[Any, ...] | None = None  # groups with equal keys place identically (pass skipping)
    _pod_index: dict[str, int] | None = None
    succeeded: int = 0  # pods reported Succeeded (lifecycle.md): they count for the gang
    failed: int = 0  # pods reported Failed: they never count

    def unplaced(self) -> list[int]:
        """The Pending pods, in pod order (finished pods are never placed again)."""
        return [i for i, n in enumerate(self.node_of) if n == PENDING_POD]

    def phase_of(self, pod: int) -> str:
        n = self.node_of[pod]
        return "Running" if n >= 0 else FINISHED_PHASES.get(n, "Pending")

    @property
    def counted(self) -> int:
        """Running plus Succeeded: what satisfies a gang (lifecycle.md *Gangs with finished pods*)."""
        return self.placed + self.succeeded

    @property
    def deficit(self) -> int:
        """What an unsatisfied group needs placed together: minCount - (Running + Succeeded)."""
        return gang.deficit(self.spec, self.placed + self.succeeded)

    @property
    def surplus(self) -> int:
        """Running pods a gang may lose one by one: Running + Succeeded - minCount."""
        return self.placed + self.succeeded - self.spec.min_count

    def pod_index(self, name: str) -> int:
        if self._pod_index is None:
            self._pod_index = {n: i for i, n in enumerate(self.spec.pod_names)}
        return self._pod_index[name]

    @property
    def key(self) -> QueueKey:
        return (-self.workload.spec.priority, self.workload.position, self.index)

    @property
    def running_key(self) -> tuple[int, int, int]:
        return (self.workload.spec.priority, self.workload.position, self.index)

    @property
    def total(self) -> int:
        return len(self.spec.pod_names)

    @property
    def scheduled(self) -> bool:
        return gang.group_satisfied(self.spec, self.placed + self.succeeded)  # Succeeded pods count

    @property
    def finished(self) -> int:
        return self.succeeded + self.failed

    @property
    def completed(self) -> bool:
        """Every pod finished (phase Completed)."""
        return self.succeeded + self.failed >= self.total

    @property
    def pending(self) -> bool:
        """Has a Pending pod."""
        return self.placed + self.succeeded + self.failed < self.total

    @property
    def ref(self) -> dict[str, str]:
        return {"namespace": self.workload.spec.namespace, "workload": self.workload.spec.name,
                "podGroup": self.spec.name}


@dataclass(eq=False)
class Workload:
    spec: WorkloadSpec
    body: dict[str, Any]  # as submitted
    position: int  # of its WorkloadSubmitted event
    groups: list[Group] = field(default_factory=list)
    composites: list[Composite] = field(default_factory=list)  # its CPGs, pre-order (composite.md)
    deleted_at: int | None = None
    # the position of the incarnation of its name before it (lifecycle.md, *Names used again*)
    previous: int | None = None
    # positions of events about it (history); an array once finished (compact)
    events: list[int] | array[int] = field(default_factory=list)
    # a PodGroup object (lifecycle.md) is a workload of its own, with one group: `owner` is the
    # workload of templates it belongs to (whose name its events carry, and whose history and
    # workload claims it shares), `template` the template it was created from
    # (class attributes, not fields: a plain workload's instance dict is as before PodGroup objects)
    owner = None  # type: Workload | None
    template = None  # type: str | None

    @property
    def home(self) -> Workload:
        """The workload whose claims this one's pods share: its owner for a PodGroup object."""
        return self.owner if self.owner is not None else self

    @property
    def key(self) -> tuple[str, str]:
        return (self.spec.namespace, self.spec.name)

    # A finished workload keeps only what its view and history need: a cluster that has seen
    # hundreds of thousands of workloads stays small in memory and in snapshots. Its spec and
    # groups are rebuilt on first access.
    @classmethod
    def recorded_only(cls, position: int) -> Workload:
        """A workload known by its position and history only until `finish` (the fast fold's
        record of a workload submitted and deleted within the events it folds: fold/fast.py)."""
        wl = cls.__new__(cls)
        wl.__dict__.update(position=position, deleted_at=None, events=[position])
        return wl

    def finish(self, deleted_at: int, finished: tuple[Any, ...]) -> None:
        """Deleted at `deleted_at`, kept as compact() leaves a finished workload: `finished` is
        (body, group extras, namespace, name, priority, preemptionPolicy); the body may be its
        canonical JSON text (the form a snapshot restores), parsed on first read."""
        self.deleted_at = deleted_at
        self.__dict__["_finished"] = finished
        self.events = array("q", self.events)

    def compact(self) -> None:
        extras = [_extra(g) for g in self.groups]
        self.__dict__["_finished"] = (self.body, extras, self.spec.namespace, self.spec.name,
                                      self.spec.priority, self.spec.preemption_policy)
        self.events = array("q", self.events)
        if self.composites:
            self.__dict__["_cpg_extras"] = [{"conditions": c.conditions, "explanation": c.explanation}
                                            for c in self.composites]
        self.__dict__.pop("composites", None)
        for name in ("spec", "groups", "body"):
            self.__dict__.pop(name, None)

    def __getattr__(self, name: str) -> Any:
        finished = self.__dict__.get("_finished")
        if finished is None or name not in ("spec", "groups", "body", "composites"):
            raise AttributeError(name)
        body, extras, namespace, wl_name, priority, policy = finished
        if isinstance(body, str):  # restored from a snapshot, or replayed (replay.py)
            body = json.loads(body)
        if isinstance(extras, str):  # restored from a snapshot
            extras = json.loads(extras)
        spec = workload_from_submission({"namespace": namespace, "name": wl_name, "priority": priority,
                                         "preemptionPolicy": policy, "spec": body})
        self.__dict__.update(spec=spec, body=body)
        groups = []
        for i, (gs, extra) in enumerate(zip(spec.groups, extras)):
            g = Group(workload=self, index=i, spec=gs, node_of=[-1] * len(gs.pod_names),
                      placed_at=[None] * len(gs.pod_names), explanation=extra["explanation"],
                      needs_explanation=extra["needsExplanation"], conditions=extra["conditions"],
                      ever_scheduled=extra["everScheduled"])
            for pod, phase in extra.get("finished") or ():  # finished pods keep their phase
                g.node_of[pod] = PHASE_CODES[phase]
                if phase == "Succeeded":
                    g.succeeded += 1
                else:
                    g.failed += 1
            groups.append(g)
        self.__dict__["groups"] = groups
        cpg_extras = self.__dict__.get("_cpg_extras") or [{}] * len(spec.cpgs)
        self.__dict__["composites"] = [
            Composite(workload=self, spec=cs, explanation=extra.get("explanation"),
                      conditions=extra.get("conditions") or {}) for cs, extra in zip(spec.cpgs, cpg_extras)]
        return self.__dict__[name]

    def __getstate__(self) -> dict[str, Any]:
        finished = self.__dict__.get("_finished")
        if finished is not None:
            # one string per finished workload: small and fast to load
            body, extras = finished[0], finished[1]
            if not isinstance(body, str):
                body = json.dumps(body, separators=(",", ":"))
            if not isinstance(extras, str):
                extras = json.dumps(extras, separators=(",", ":"))
            out = {k: v for k, v in self.__dict__.items() if k not in ("spec", "groups", "body", "composites")}
            out["_finished"] = (body, extras, *finished[2:])
            return out
        return self.__dict__

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


def _extra(g: Group) -> dict[str, Any]:
    """What a finished workload keeps of a group besides its spec (its finished pods only when it has any:
    a workload without them keeps what it kept before pod phases)."""
    extra: dict[str, Any] = {"conditions": g.conditions, "explanation": g.explanation,
                             "needsExplanation": g.needs_explanation, "everScheduled": g.ever_scheduled}
    if g.succeeded or g.failed:
        extra["finished"] = [[p, FINISHED_PHASES[n]] for p, n in enumerate(g.node_of) if n in FINISHED_PHASES]
    return extra


@dataclass(eq=False)
class Composite:
    """A composite pod group's state (composite.md); a root is the queue entry of its tree."""
    workload: Workload
    spec: CpgSpec
    domain: str | None = None  # pinned while satisfied (topology)
    explanation: dict[str, Any] | None = None
    needs_explanation: bool = True  # a root: no failed try recorded since it became pending
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)
    ever_scheduled: bool = False
    class_key: tuple[Any, ...] | None = None  # no class: every tree is its own queue bucket (queue.py)
    placed: int = 0  # unused by trees; queue.bucket_key reads it
    memo: tuple[int, int, int, int] | None = None  # a root: what the cluster looked like at its last failed try

    @property
    def key(self) -> QueueKey:
        return (-self.workload.spec.priority, self.workload.position, self.spec.root)

    @property
    def ref(self) -> dict[str, str]:
        return {"namespace": self.workload.spec.namespace, "workload": self.workload.spec.name,
                "compositePodGroup": self.spec.name}

    @property
    def tree_lane(self) -> bool:
        """A root without device claims queues in the shared lane of trees (queue.TREES)."""
        spec = self.workload.spec
        return not (spec.claims or any(g.claims for g in spec.groups) or any(s.claims for s in spec.shapes))

    @property
    def pending(self) -> bool:
        """A root: unsatisfied, or some pod of its tree not placed (then it is in the queue)."""
        return root_pending(self.workload, self.spec.index)


# -- trees: satisfied predicates (composite.md *Satisfied*) ---------------------------------------
def cpg_satisfied(wl: Workload, ci: int) -> bool:
    return gang.cpg_satisfied(wl.spec, ci, lambda gi: wl.groups[gi].counted)


def satisfied_children(wl: Workload, ci: int) -> int:
    return gang.satisfied_children(wl.spec, ci, lambda gi: wl.groups[gi].counted)


def subtree_groups(wl: Workload, ci: int) -> list[int]:
    """The pod groups under a CPG, in pre-order (their indices are consecutive)."""
    spec = wl.spec.cpgs[ci]
    out = list(spec.child_groups)
    for cj in spec.child_cpgs:
        out += subtree_groups(wl, cj)
    return out


def subtree_cpgs(wl: Workload, ci: int) -> list[int]:
    out = [ci]
    for cj in wl.spec.cpgs[ci].child_cpgs:
        out += subtree_cpgs(wl, cj)
    return out


def root_pending(wl: Workload, ci: int) -> bool:
    """Unsatisfied, or some pod of its subtree not placed."""
    return not cpg_satisfied(wl, ci) or any(wl.groups[gi].pending for gi in subtree_groups(wl, ci))
