"""Claim templates, and which claims each pod of a group uses (model.md *Devices*).

Claim keys: ("Pod", workload position, group index, pod index, name),
("PodGroup", workload position, group index, name), ("Workload", workload position, name); a PodGroup
object's workload claims are its owner's (`Workload.home`), shared by every PodGroup of it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from service.domain.model.quantity import QuantityError, parse_quantity
from service.domain.model.specs import ClaimRef

if TYPE_CHECKING:
    from service.domain.dra.devices import DeviceState
    from service.domain.model.workload import Group, Workload

POD = "Pod"
GROUP = "PodGroup"
WORKLOAD = "Workload"

ClaimKey = tuple[Any, ...]  # one of the three forms above; compared and sorted as tuples


@dataclass(frozen=True)
class Request:
    name: str
    device_class: str
    all: bool
    count: int
    selectors: tuple[str, ...]
    capacity: tuple[tuple[str, int], ...] = ()  # capacity.requests, by name as written (sharing.md)


@dataclass(frozen=True)
class Template:
    requests: tuple[Request, ...]
    constraints: tuple[tuple[str, tuple[int, ...]], ...]  # (matchAttribute, request indices)
    error: str | None = None
    distinct: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (distinctAttribute, request indices)

    @property
    def sharing_aware(self) -> bool:
        """Needs the capacity-aware allocation (sharing.md) even with no shareable device."""
        return bool(self.distinct) or any(r.capacity for r in self.requests)


def parse_template(spec: Any) -> Template:
    if spec is None:
        return Template((), (), "TemplateNotFound")
    devices = (spec or {}).get("devices") or {}
    requests = []
    for r in devices.get("requests") or ():
        exactly = r.get("exactly") or {}
        requests.append(Request(
            name=r.get("name", ""), device_class=exactly.get("deviceClassName", ""),
            all=exactly.get("allocationMode", "ExactCount") == "All", count=int(exactly.get("count", 1)),
            selectors=tuple(s["cel"]["expression"] for s in exactly.get("selectors") or ()),
            capacity=_capacity_requests(exactly)))
    index = {r.name: i for i, r in enumerate(requests)}
    constraints = []
    distinct = []
    for c in devices.get("constraints") or ():
        names = c.get("requests")
        members = tuple(range(len(requests))) if not names else tuple(index[n] for n in names if n in index)
        if c.get("matchAttribute"):
            constraints.append((c["matchAttribute"], members))
        elif c.get("distinctAttribute"):
            distinct.append((c["distinctAttribute"], members))
    return Template(tuple(requests), tuple(constraints), None, tuple(distinct))


def _capacity_requests(exactly: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    out = []
    for name, amount in sorted(((exactly.get("capacity") or {}).get("requests") or {}).items()):
        try:
            out.append((name, parse_quantity(amount, name.rpartition("/")[2])))
        except QuantityError:  # validated upstream
            continue
    return tuple(out)


@dataclass(frozen=True)
class Use:
    """One claim a pod (or its group) needs: its name, sharing and template."""
    name: str
    sharing: str
    template: Template
    consumer: bool  # a pod references it (it must reach its devices)


class GroupInfo:
    __slots__ = ("shape_uses", "extra", "group_uses", "wl_uses", "any")

    def __init__(self, shape_uses: dict[int, tuple[Use, ...]], extra: tuple[Use, ...],
                 group_uses: tuple[Use, ...], wl_uses: tuple[Use, ...]) -> None:
        self.shape_uses = shape_uses
        self.extra = extra  # unreferenced group claims, then unreferenced workload claims
        self.group_uses = group_uses  # every group claim, spec order
        self.wl_uses = wl_uses  # workload claims this group's view shows
        self.any = bool(extra or group_uses or wl_uses or any(shape_uses.values()))


@dataclass(frozen=True)
class Allocation:
    claim: ClaimKey
    name: str
    sharing: str
    pod: int | None  # the pod of a per-pod claim
    device_ids: tuple[int, ...]  # in allocation order
    # per device: None on an exclusive device, else (request name, k, consumed amounts)
    shares: tuple[Share | None, ...] | None = None

    def share(self, i: int) -> Share | None:
        return None if self.shares is None else self.shares[i]


Share = tuple[str, int, tuple[tuple[str, int], ...]]


def _resolve(wl: Workload, gi: int, ref: ClaimRef) -> str:
    gs = wl.spec.groups[gi]
    if any(r.name == ref.name and r.template == ref.template for r in gs.claims):
        return GROUP
    if any(r.name == ref.name and r.template == ref.template for r in wl.spec.claims):
        return WORKLOAD
    return POD


def _build_info(wl: Workload, gi: int) -> GroupInfo:
    spec = wl.spec
    templates = {name: body for name, body in spec.templates}
    parsed: dict[str, Template] = {}

    def template(name: str) -> Template:
        if name not in parsed:
            parsed[name] = parse_template(templates.get(name))
        return parsed[name]

    wl_referenced: set[str] = set()
    for j, gs in enumerate(spec.groups):
        for s in set(gs.pod_shapes):
            for ref in spec.shapes[s].claims:
                if _resolve(wl, j, ref) == WORKLOAD:
                    wl_referenced.add(ref.name)
    gs = spec.groups[gi]
    shape_uses: dict[int, tuple[Use, ...]] = {}
    group_referenced: set[str] = set()
    own_wl: set[str] = set()
    for s in sorted(set(gs.pod_shapes)):
        uses = []
        for ref in spec.shapes[s].claims:
            sharing = _resolve(wl, gi, ref)
            uses.append(Use(ref.name, sharing, template(ref.template), True))
            if sharing == GROUP:
                group_referenced.add(ref.name)
            elif sharing == WORKLOAD:
                own_wl.add(ref.name)
        shape_uses[s] = tuple(uses)
    group_uses = tuple(Use(r.name, GROUP, template(r.template), r.name in group_referenced) for r in gs.claims)
    wl_all = tuple(Use(r.name, WORKLOAD, template(r.template), r.name in wl_referenced) for r in spec.claims)
    extra = tuple(u for u in group_uses if not u.consumer) + tuple(u for u in wl_all if not u.consumer)
    wl_uses = tuple(u for u in wl_all if u.name in own_wl or not u.consumer)
    return GroupInfo(shape_uses, extra, group_uses, wl_uses)


def info(ds: DeviceState, g: Group) -> GroupInfo:
    """The claims the group's pods use (cached per group in the device state)."""
    key = (g.workload.position, g.index)
    found = ds.infos.get(key)
    if found is None:
        found = _build_info(g.workload, g.index)
        ds.infos[key] = found
    return found


def pod_uses(ds: DeviceState, g: Group, pod: int) -> tuple[Use, ...]:
    gi = info(ds, g)
    return gi.shape_uses.get(g.spec.pod_shapes[pod], ()) + gi.extra


def key(g: Group, pod: int, use: Use) -> ClaimKey:
    if use.sharing == POD:
        return (POD, g.workload.position, g.index, pod, use.name)
    if use.sharing == GROUP:
        return (GROUP, g.workload.position, g.index, use.name)
    return (WORKLOAD, g.workload.home.position, use.name)


def key_of(g: Group, desc: dict[str, Any]) -> ClaimKey | None:
    """The key of a claim as events describe it ({"name", "sharing", "pod"})."""
    sharing = desc.get("sharing")
    if sharing == POD:
        return (POD, g.workload.position, g.index, g.pod_index(desc["pod"]), desc["name"])
    if sharing == GROUP:
        return (GROUP, g.workload.position, g.index, desc["name"])
    if sharing == WORKLOAD:
        return (WORKLOAD, g.workload.home.position, desc["name"])
    return None


def descriptor(g: Group, key: ClaimKey) -> dict[str, Any]:
    """A claim as events describe it; `g` is the group a per-pod claim's pod is in."""
    if key[0] == POD:
        return {"name": key[4], "sharing": POD, "pod": g.spec.pod_names[key[3]]}
    return {"name": key[-1], "sharing": key[0], "pod": None}


def pod_needs_devices(g: Group, pod: int) -> bool:
    wl = g.workload.spec
    return bool(wl.shapes[g.spec.pod_shapes[pod]].claims or g.spec.claims or wl.claims)


def group_needs_devices(g: Group) -> bool:
    wl = g.workload.spec
    return bool(g.spec.claims or wl.claims or any(wl.shapes[s].claims for s in set(g.spec.pod_shapes)))


def template_of(ds: DeviceState, g: Group, key: ClaimKey) -> Template:
    """The template of one of the claims the group uses."""
    gi = info(ds, g)
    for u in [u for uses in gi.shape_uses.values() for u in uses] + list(gi.group_uses) + list(gi.wl_uses):
        if u.name == key[-1] and u.sharing == key[0]:
            return u.template
    return Template((), ())
