"""Data model of the scheduler core: plain immutable values in, plain decisions out.

Snapshot objects are frozen dataclasses whose mappings are read-only copies (``FrozenDict``): the
core keeps values derived from them between calls, and never writes to them.

Resources are ``dict[str, int]`` in integer units: ``nvidia.com/gpu`` as a count, ``cpu`` in
millicores, ``memory`` in bytes, extended resources (``rdma/rail0``, ``nvidia.com/sriov_ib``) as
counts. Times are seconds on the caller's clock (``Snapshot.now``).

Every value checks itself when built and raises ``ValueError`` naming the field, what it holds and
what was expected (a negative request, ``min_member`` beyond the members, an unknown backfill mode).

Callers apply a ``Decisions`` value in this order: evictions, restarts and failures first (they
release capacity), then binds; binds may use capacity that the evictions of the same call free.
"""

from __future__ import annotations

import enum
import math
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

GPU = "nvidia.com/gpu"
CPU = "cpu"
MEMORY = "memory"

Resources = Mapping[str, int]

DEFAULT_TOPOLOGY_LABEL_KEYS = (
    "railforge.io/spine",
    "railforge.io/leaf",
    "railforge.io/nvlink-domain",
)
DEFAULT_TOPOLOGY_LEVEL_NAMES = ("spine", "leaf", "nvlink")

NO_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
TolerationOperator = Literal["Equal", "Exists"]
SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
BackfillMode = Literal["easy", "conservative", "none"]
BackfillOrder = Literal["shortest", "over_share_last", "fair"]
OrderMode = Literal["fair", "fifo", "sjf_oracle"]
FailurePolicy = Literal["restart", "fail"]
EvictCause = Literal["reclaim", "preempt"]


PER_NODE_TOPOLOGY_VALUES = ("node", "none")


TopologyLevels = Iterable[tuple[Iterable[str], Collection[str]]]


def topology_path(labels: Mapping[str, str], levels: TopologyLevels) -> tuple[str, ...]:
    """A node's topology path, widest level first, from its labels. ``levels``: per level, the label keys
    that may name the node's domain (the first the node carries with a value wins) and the values that mean
    "this node alone" (the hardware facts write ``railforge.io/nvlink-domain: node`` for NVLink inside one
    node, ``none`` for no NVLink). The path stops at the first level the node has no shared domain for, so
    nodes that carry such a value never form one domain: the core counts each as a domain of its own there
    and at every finer level."""
    path = []
    for keys, per_node_values in levels:
        value = next((labels[key] for key in keys if labels.get(key)), None)
        if value is None or value in per_node_values:
            break
        path.append(value)
    return tuple(path)


def topology_from_labels(
    labels: Mapping[str, str], keys: tuple[str, ...] = DEFAULT_TOPOLOGY_LABEL_KEYS
) -> tuple[str, ...]:
    """Topology path root->leaf from one label key per level (``topology_path``, with
    ``PER_NODE_TOPOLOGY_VALUES`` per-node at every level)."""
    return topology_path(labels, (((key,), PER_NODE_TOPOLOGY_VALUES) for key in keys))


def add_resources(total: dict[str, int], extra: Resources, times: int = 1) -> dict[str, int]:
    """Add ``extra * times`` into ``total`` in place and return it."""
    for name, amount in extra.items():
        total[name] = total.get(name, 0) + amount * times
    return total


class FrozenDict(dict):
    """A dict that refuses changes. Snapshot objects hold their mappings as these, so a value the
    core derived from one (and keeps between calls) cannot go stale under a caller's edit: build a
    new object instead (``dataclasses.replace``)."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("snapshot mappings are read-only; build a new object (dataclasses.replace) instead")

    # every mutator refuses, whatever the signature it overrides
    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        return FrozenDict, (dict(self),)


def _freeze(owner: object, *field_names: str) -> None:
    """Replace the named mapping and sequence fields of a frozen dataclass, while it is built, by
    read-only copies (a ``FrozenDict``, a tuple): a list the caller edits later cannot change it."""
    for name in field_names:
        value = getattr(owner, name)
        if value is not None and not isinstance(value, (FrozenDict, tuple)):
            object.__setattr__(owner, name, FrozenDict(value) if isinstance(value, Mapping) else tuple(value))


def _require(ok: bool, owner: str, problem: str) -> None:
    """Refuse a malformed value when it is built, naming what is wrong and what was expected."""
    if not ok:
        raise ValueError(f"{owner}: {problem}")


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_resources(owner: str, field_name: str, resources: Resources) -> None:
    for name, amount in resources.items():
        _require(_whole(amount), owner, f"{field_name}[{name!r}] is {amount!r}; expected a whole number >= 0")


def _check_choice(owner: str, field_name: str, value: str, choices: object) -> None:
    allowed = get_args(choices)
    _require(value in allowed, owner, f"{field_name} is {value!r}; expected one of {', '.join(allowed)}")


def _check_finite(owner: str, field_name: str, value: float | None, optional: bool = False) -> None:
    """A time or amount that must be a real number (NaN and infinities compare false with everything)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    _require(
        number or (optional and value is None),
        owner,
        f"{field_name} is {value!r}; expected {'None or ' if optional else ''}a finite number",
    )


def _check_time(owner: str, field_name: str, value: float | None, positive: bool = False) -> None:
    """A duration in seconds, or None (unbounded)."""
    ok = value is None or (value > 0 if positive else value >= 0)
    _require(
        ok, owner, f"{field_name} is {value!r}; expected None or a number of seconds {'>' if positive else '>='} 0"
    )


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: TaintEffect = "NoSchedule"

    def __post_init__(self) -> None:
        _check_choice(f"Taint {self.key}", "effect", self.effect, TaintEffect)


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # empty key with operator Exists tolerates every taint
    operator: TolerationOperator = "Equal"
    value: str = ""
    effect: str = ""  # empty matches every effect

    def __post_init__(self) -> None:
        _check_choice(f"Toleration {self.key}", "operator", self.operator, TolerationOperator)

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: SelectorOperator
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _freeze(self, "values")
        owner = f"NodeSelectorRequirement {self.key}"
        _check_choice(owner, "operator", self.operator, SelectorOperator)
        listed = self.operator in ("In", "NotIn")
        _require(
            listed == bool(self.values),
            owner,
            f"values is {self.values!r}; {self.operator} expects values only with In and NotIn",
        )

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None  # DoesNotExist


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    schedulable: bool = True  # False when cordoned
    ready: bool = True
    # root->leaf, e.g. ("spine0", "leaf03", "nvl-07"); when empty, decide() reads the path from the
    # labels named by SchedulerConfig.topology_label_keys
    topology: tuple[str, ...] = ()
    # reserved for maintenance from this time on: only gangs expected to end before it start here
    maintenance_from: float | None = None

    def __post_init__(self) -> None:
        _freeze(self, "allocatable", "labels", "taints", "topology")
        _check_resources(f"Node {self.name}", "allocatable", self.allocatable)
        _check_finite(f"Node {self.name}", "maintenance_from", self.maintenance_from, optional=True)


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    level: str  # a level name of SchedulerConfig.topology_level_names, e.g. "leaf"
    required: bool = True  # False: preferred only, the gang may spread wider


@dataclass(frozen=True, slots=True)
class Spread:
    """How ``members`` spread over domains, counting ``running``: pods already there that the rule counts
    too, as (domain, how many). A domain is a node (``topology_key`` None; ``running`` then names nodes) or,
    with ``topology_key``, the nodes that carry one value of that label (``running`` names values).

    One of Kubernetes' two rules: ``max_per_domain``, at most so many in any one domain (pod anti-affinity),
    a node without the label taking any number; or ``max_skew`` (``max_per_domain`` None), a topology
    spread: once the gang has landed, the domains ``running`` lists — every one the rule counts, zeros
    included — hold numbers that differ by at most that much (a node in no listed domain is not counted).
    ``required=False``: a preference, kept when some placement keeps it, dropped otherwise. ``source``
    names where the rule comes from (a pod's field), for reasons."""

    members: tuple[str, ...]
    max_per_domain: int | None
    running: tuple[tuple[str, int], ...] = ()
    required: bool = True
    source: str = ""
    topology_key: str | None = None
    max_skew: int | None = None

    def __post_init__(self) -> None:
        _freeze(self, "members", "running")
        owner = f"Spread {self.source or self.members}"
        _require(bool(self.members), owner, "members is empty; expected the members it spreads")
        if self.max_skew is None:
            _require(
                _whole(self.max_per_domain),
                owner,
                f"max_per_domain is {self.max_per_domain!r}; expected a whole number (or max_skew instead)",
            )
        else:
            _require(
                self.max_per_domain is None and _whole(self.max_skew) and self.max_skew > 0,
                owner,
                f"max_skew is {self.max_skew!r} beside max_per_domain {self.max_per_domain!r}; "
                "expected a whole number above 0, and max_per_domain None",
            )
        _require(
            self.topology_key is None or bool(self.topology_key),
            owner,
            "topology_key is empty; expected a node label key, or None for one node per domain",
        )

    def domain(self, node: Node) -> str | None:
        """The node's domain under this rule; None: the node lacks the label."""
        return node.name if self.topology_key is None else node.labels.get(self.topology_key)

    def room_on(self, nodes: Iterable[Node]) -> int | None:
        """How many members the nodes take at most, counting nothing running; None: no bound (a topology
        spread, or a node without the label)."""
        domains = {self.domain(node) for node in nodes}
        if self.max_per_domain is None or None in domains:
            return None
        return len(domains) * self.max_per_domain


@dataclass(frozen=True, slots=True)
class Together:
    """All of a gang's members in one domain: the nodes that carry one value of ``topology_key`` (a required
    pod affinity among the gang's own pods); a node without the label takes none of them. ``source`` names
    where the rule comes from (a pod's field), for reasons."""

    topology_key: str
    source: str = ""

    def __post_init__(self) -> None:
        _require(bool(self.topology_key), f"Together {self.source}", "topology_key is empty; expected a node label key")


@dataclass(frozen=True, slots=True)
class Member:
    name: str
    requests: Resources
    # the node this member must run on (a pod's nodeSelector on kubernetes.io/hostname), or None: any
    # node the gang's rules allow; a gang pins all its members or none
    node: str | None = None

    def __post_init__(self) -> None:
        _freeze(self, "requests")
        _check_resources(f"Member {self.name}", "requests", self.requests)


@dataclass(frozen=True, slots=True)
class Gang:
    """A group of pods that start together or not at all.

    The first ``min_member`` members are required; later ones are placed only alongside them when
    they fit. ``oracle_runtime`` is the true runtime, used only by the ``sjf_oracle`` order.
    ``restart_count`` and ``not_before`` are carried by the caller across restarts (backoff). A
    restarted gang's ``schedule_timeout`` counts from the end of its backoff.
    """

    name: str
    queue: str
    members: tuple[Member, ...]
    min_member: int | None = None  # None: every member is required
    priority: int = 0
    submit_time: float = 0.0
    max_runtime: float | None = None
    schedule_timeout: float | None = None
    topology: TopologyConstraint | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: tuple[NodeSelectorRequirement, ...] = ()  # required node affinity, all must match
    tolerations: tuple[Toleration, ...] = ()
    # admission checks at least this much (beyond the required members' requests) against quotas
    # and limits, and placement needs at least its GPUs free
    min_resources: Resources | None = None
    oracle_runtime: float | None = None
    restart_count: int = 0
    not_before: float | None = None  # a restarted gang waits until then (backoff); None: no backoff
    # the restarts its owner allows, those done included (it counts the pods a restart removes against a limit of
    # its own); once restart_count reaches it the gang fails instead (its owner would fail the job). None: no limit
    owner_max_restarts: int | None = None
    # why its owner allows no more, when that is its own rule rather than a count (the reason a Fail then gives)
    owner_limit_reason: str = ""
    # how its pods spread over nodes or wider domains (pod anti-affinity and topology spread)
    spreads: tuple[Spread, ...] = ()
    # the one domain all its members share (pod affinity among its own pods); None: no such rule
    together: Together | None = None
    # node rules it prefers kept (preferred pod affinity towards bound pods): a node that breaks one is tried
    # after the others of its level, as one with a PreferNoSchedule taint, never ruled out
    preferred_affinity: tuple[NodeSelectorRequirement, ...] = ()

    def __post_init__(self) -> None:
        _freeze(
            self,
            "node_selector",
            "min_resources",
            "members",
            "affinity",
            "tolerations",
            "spreads",
            "preferred_affinity",
        )
        owner = f"Gang {self.name}"
        names = [member.name for member in self.members]
        _require(bool(names), owner, "members is empty; expected at least one member")
        _require(len(set(names)) == len(names), owner, f"member names repeat in {names}; expected unique names")
        _require(
            self.min_member is None or 1 <= self.min_member <= len(names),
            owner,
            f"min_member is {self.min_member!r}; expected None or 1 to {len(names)} (its members)",
        )
        pinned = [member.name for member in self.members if member.node is not None]
        _require(
            not pinned or len(pinned) == len(names),
            owner,
            f"members {pinned} name a node and {sorted(set(names) - set(pinned))} do not; expected all or none",
        )
        _check_time(owner, "max_runtime", self.max_runtime, positive=True)
        _check_time(owner, "schedule_timeout", self.schedule_timeout)
        _check_time(owner, "oracle_runtime", self.oracle_runtime)
        _check_finite(owner, "submit_time", self.submit_time)
        _check_finite(owner, "not_before", self.not_before, optional=True)
        _require(
            isinstance(self.priority, int) and not isinstance(self.priority, bool),
            owner,
            f"priority is {self.priority!r}; expected a whole number",
        )
        _require(
            _whole(self.restart_count), owner, f"restart_count is {self.restart_count!r}; expected a whole number >= 0"
        )
        _require(
            self.owner_max_restarts is None or _whole(self.owner_max_restarts),
            owner,
            f"owner_max_restarts is {self.owner_max_restarts!r}; expected None or a whole number >= 0",
        )
        if self.min_resources is not None:
            _check_resources(owner, "min_resources", self.min_resources)
        for spread in self.spreads:
            strangers = sorted(set(spread.members) - set(names))
            _require(not strangers, owner, f"a spread names {strangers}; expected members of the gang")

    @property
    def required_members(self) -> int:
        return len(self.members) if self.min_member is None else self.min_member

    def tolerates(self, taint: Taint) -> bool:
        return any(toleration.tolerates(taint) for toleration in self.tolerations)

    def total_requests(self) -> dict[str, int]:
        """Summed requests of all members (the most the gang can occupy)."""
        total: dict[str, int] = {}
        for member in self.members:
            add_resources(total, member.requests)
        return total


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    parent: str | None = None
    # guaranteed; a resource it does not name: 0, or for a parent, the sum its children are guaranteed
    quota: Resources = field(default_factory=dict)
    limit: Resources = field(default_factory=dict)  # hard cap; missing resource: unlimited
    over_quota_weight: float = 1.0
    priority: int = 0
    default_max_runtime: float | None = None

    def __post_init__(self) -> None:
        _freeze(self, "quota", "limit")
        owner = f"Queue {self.name}"
        _require(self.parent != self.name, owner, "parent is the queue itself; expected another queue or None")
        _check_resources(owner, "quota", self.quota)
        _check_resources(owner, "limit", self.limit)
        _require(self.over_quota_weight >= 0, owner, f"over_quota_weight is {self.over_quota_weight!r}; expected >= 0")
        _check_time(owner, "default_max_runtime", self.default_max_runtime, positive=True)


@dataclass(frozen=True, slots=True)
class RunningGang:
    gang: Gang
    placement: Mapping[str, str]  # member name -> node name
    start_time: float
    expected_end: float = math.inf  # start_time + max runtime; inf when unbounded
    borrowed: bool = False  # started beyond its queue's quota, so reclaimable
    failed_members: tuple[str, ...] = ()
    # The gang whose reservation it started past (``Bind.backfilled_past``): the caller keeps it
    # with the running gang, since it decides what may preempt it (``preempt_backfill``).
    backfilled_past: str | None = None

    def __post_init__(self) -> None:
        _freeze(self, "placement", "failed_members")
        gang = self.gang
        names = {member.name for member in gang.members}
        required = [member.name for member in gang.members[: gang.required_members]]
        placed = self.placement.keys()
        owner = f"RunningGang {gang.name}"
        _require(
            placed <= names and all(name in placed for name in required),
            owner,
            f"placement names {sorted(placed)}; expected every required member {required} and only its members",
        )
        _check_finite(owner, "start_time", self.start_time)
        _require(
            self.expected_end >= self.start_time,
            owner,
            f"expected_end is {self.expected_end!r}; expected a time from start_time ({self.start_time}) on, or inf",
        )


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Policy knobs. ``backfill="none"`` means no reservations; ``skip_ahead`` then decides
    whether a later gang may start while an earlier one is blocked."""

    backfill: BackfillMode = "easy"
    reservation_depth: int = 1  # gangs that get reservations under conservative backfill
    # Order of the gangs tried after the last reservation (they can only backfill): "shortest"
    # estimated runtime first; "over_share_last", the same but the gangs of queues ahead of their fair
    # share after the others' (``stages.order.over_share``; with ``order="fair"``, the one that counts
    # shares: under another order it is "shortest"); or the same "fair" order as before.
    backfill_order: BackfillOrder = "shortest"
    order: OrderMode = "fair"
    skip_ahead: bool = True
    fair_share_half_life: float = 7 * 86400.0  # usage decay; the caller decays Snapshot.usage
    aging_bound: float | None = 3 * 86400.0  # gangs pending longer are served first, oldest first
    reclaim: bool = True
    min_runtime_before_reclaim: float = 600.0
    # The work one claim may destroy: victims' GPUs x run time so far, at most this many times the
    # claimer's GPUs x time waited. Every eviction loses its victim's progress, so a fresh claim may
    # only take young borrowers and a long wait buys more. None: no bound.
    reclaim_cost_limit: float | None = 1.0
    # A reservation holder that could start now but for gangs of its own queue that started past its
    # reservation (their estimates promised to end before it starts, and the gangs holding it up
    # ended earlier than estimated) evicts them, whole, within the same bound on lost work.
    preempt_backfill: bool = True
    failure_policy: FailurePolicy = "restart"
    restart_backoff_base: float = 30.0
    restart_backoff_max: float = 3600.0
    max_restarts: int | None = None  # beyond it a failing gang fails; None: unlimited
    # Walltime (Slurm's time limit): a gang still running this long past its own max runtime fails, its pods
    # ended. None: off; a gang without a max runtime is never ended.
    walltime_grace: float | None = None
    topology_label_keys: tuple[str, ...] = DEFAULT_TOPOLOGY_LABEL_KEYS
    topology_level_names: tuple[str, ...] = DEFAULT_TOPOLOGY_LEVEL_NAMES

    def __post_init__(self) -> None:
        _freeze(self, "topology_label_keys", "topology_level_names")
        owner = "SchedulerConfig"
        _check_choice(owner, "backfill", self.backfill, BackfillMode)
        _check_choice(owner, "backfill_order", self.backfill_order, BackfillOrder)
        _check_choice(owner, "order", self.order, OrderMode)
        _check_choice(owner, "failure_policy", self.failure_policy, FailurePolicy)
        _require(self.reservation_depth >= 1, owner, f"reservation_depth is {self.reservation_depth!r}; expected >= 1")
        for name in ("fair_share_half_life", "min_runtime_before_reclaim", "restart_backoff_base"):
            _check_time(owner, name, getattr(self, name))
        _check_time(owner, "aging_bound", self.aging_bound)
        _check_time(owner, "walltime_grace", self.walltime_grace)
        _require(
            self.restart_backoff_max >= self.restart_backoff_base,
            owner,
            f"restart_backoff_max is {self.restart_backoff_max!r}; expected >= restart_backoff_base",
        )
        for name in ("reclaim_cost_limit", "max_restarts"):
            value = getattr(self, name)
            _require(value is None or value >= 0, owner, f"{name} is {value!r}; expected None or >= 0")
        _require(
            len(self.topology_label_keys) == len(self.topology_level_names),
            owner,
            f"topology_label_keys has {len(self.topology_label_keys)} keys and topology_level_names "
            f"{len(self.topology_level_names)} names; expected one name per key",
        )

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> SchedulerConfig:
        """Named policy bundles; keyword overrides replace single fields."""
        presets = {
            "railforge": cls(),
            "strict_fifo": cls(backfill="none", order="fifo", skip_ahead=False, reclaim=False),
            "best_effort_fifo": cls(backfill="none", order="fifo", skip_ahead=True, reclaim=False),
            "sjf_oracle": cls(backfill="none", order="sjf_oracle", skip_ahead=True, reclaim=False),
        }
        if name not in presets:
            raise ValueError(f"unknown preset {name!r}; known: {', '.join(sorted(presets))}")
        return replace(presets[name], **overrides)

    def restart_delay(self, restart_count: int) -> float:
        """Exponential backoff before restart number ``restart_count + 1``."""
        return min(self.restart_backoff_max, self.restart_backoff_base * 2.0 ** min(restart_count, 60))


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    nodes: tuple[Node, ...]
    queues: tuple[Queue, ...]
    pending: tuple[Gang, ...]
    running: tuple[RunningGang, ...]
    usage: Mapping[str, float] = field(default_factory=dict)  # queue -> decayed GPU-seconds
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    # The reservations of the previous decisions, handed back by the caller: a holder starts on its
    # reserved nodes once they are free, and keeps its start while they stay free for it.
    reservations: tuple[Reservation, ...] = ()

    def __post_init__(self) -> None:
        _freeze(self, "nodes", "queues", "pending", "running", "usage", "reservations")
        _check_finite("Snapshot", "now", self.now)
        names = [node.name for node in self.nodes]
        if len(set(names)) < len(names):
            repeated = sorted({name for name in names if names.count(name) > 1})
            _require(False, "Snapshot", f"nodes repeat the names {repeated}; expected one node per name")
        for queue, used in self.usage.items():
            _require(
                isinstance(used, (int, float)) and math.isfinite(used) and used >= 0,
                "Snapshot",
                f"usage[{queue!r}] is {used!r}; expected a finite number >= 0",
            )


@dataclass(frozen=True, slots=True)
class Bind:
    gang_name: str
    placement: dict[str, str]  # member name -> node name
    borrowed: bool = False
    backfilled_past: str | None = None  # the gang holding the reservation this one started past


@dataclass(frozen=True, slots=True)
class Evict:
    gang_name: str
    reason: str
    cause: EvictCause = "reclaim"


@dataclass(frozen=True, slots=True)
class Restart:
    gang_name: str
    not_before: float
    reason: str


@dataclass(frozen=True, slots=True)
class Fail:
    gang_name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Reservation:
    """A blocked gang's earliest start. Only ``held`` is kept for it on each node during its run
    window (node name -> sorted (resource, amount) pairs); the rest of those nodes stays open to
    backfill."""

    gang_name: str
    nodes: tuple[str, ...]
    start: float
    held: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
    # member name -> node name, sorted: where the gang starts at ``start`` when that is still free
    placement: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _freeze(self, "nodes", "held", "placement")


class ReasonCode(enum.StrEnum):
    """The stable code of a reason (docs/scheduler-core.md lists them): what a program matches on,
    while the sentence beside it is for people and may be reworded."""

    QUOTA_LIMIT = "quota.limit"
    QUOTA_LIMIT_ALONE = "quota.limit-alone"
    CAPACITY_DOMAIN = "capacity.domain"
    CAPACITY_CLUSTER = "capacity.cluster"
    CAPACITY_SELECTOR = "capacity.selector"
    CAPACITY_AFFINITY = "capacity.affinity"
    CAPACITY_TAINTS = "capacity.taints"
    CAPACITY_NODE_RULES = "capacity.node-rules"
    CAPACITY_FRAGMENTED = "capacity.fragmented"
    CAPACITY_PODS = "capacity.pods"
    CAPACITY_APART = "capacity.apart"
    CAPACITY_PINNED = "capacity.pinned"
    CAPACITY_SPREAD = "capacity.spread"
    NEVER_FITS = "capacity.never-fits"
    NEVER_FITS_SELECTOR = "capacity.never-fits.selector"
    NEVER_FITS_AFFINITY = "capacity.never-fits.affinity"
    NEVER_FITS_TAINTS = "capacity.never-fits.taints"
    NEVER_FITS_NODE_RULES = "capacity.never-fits.node-rules"
    NEVER_FITS_DOMAIN = "capacity.never-fits.domain"
    NEVER_FITS_PODS = "capacity.never-fits.pods"
    NEVER_FITS_REQUESTS = "capacity.never-fits.requests"
    NEVER_FITS_PINNED = "capacity.never-fits.pinned"
    NEVER_FITS_SPREAD = "capacity.never-fits.spread"
    UNKNOWN_LEVEL = "topology.unknown-level"
    RESERVED = "reserved.holder"
    RESERVED_BLOCKED = "reserved.blocked"
    RESERVED_NO_START = "reserved.no-start"
    MAINTENANCE = "reserved.maintenance"
    STRICT_ORDER = "order.strict"
    UNDECLARED_QUEUE = "queue.undeclared"
    BACKOFF = "restart.backoff"
    SCHEDULE_TIMEOUT = "timeout.schedule"


class Reason(str):
    """A reason's sentence (the string itself) with its stable ``code`` beside it."""

    __slots__ = ("code",)
    code: ReasonCode

    def __new__(cls, text: str, code: ReasonCode) -> Reason:
        reason = super().__new__(cls, text)
        reason.code = code
        return reason

    def __reduce__(self) -> tuple:
        return Reason, (str(self), self.code)


class Reasons(MutableMapping[str, Reason]):
    """Pending gang -> why it did not start: a ``Reason``, the sentence with its stable code
    (``code(gang)``).

    A pass that stops early leaves the reasons of its untried gangs to a callback (``defer``):
    they depend only on the pass's final state, so they are worked out on the first read, and a
    caller that never reads them (the simulator) never pays for them. Readers in several threads
    are safe: the first works them out under a lock, and the others see the mapping only once it
    is complete."""

    def __init__(self) -> None:
        self._known: dict[str, Reason] = {}
        self._deferred: Callable[[], None] | None = None
        self._filling: AbstractContextManager = threading.Lock()

    def defer(self, fill: Callable[[], None]) -> None:
        self._deferred = fill

    def fill_under(self, lock: AbstractContextManager) -> None:
        """Work the deferred reasons out under ``lock``: the ``Scheduler``'s, since they read its
        memo, which its next ``decide`` call (perhaps in another thread) changes."""
        self._filling = lock

    def _resolved(self) -> dict[str, Reason]:
        if self._deferred is not None:
            with self._filling:
                fill = self._deferred
                if fill is not None:
                    fill()
                    self._deferred = None  # only now: a reader that finds it None finds every reason
        return self._known

    def __getitem__(self, gang: str) -> Reason:
        return self._resolved()[gang]

    def __setitem__(self, gang: str, reason: Reason) -> None:
        self._known[gang] = reason

    def __delitem__(self, gang: str) -> None:
        del self._resolved()[gang]

    def __iter__(self) -> Iterator[str]:
        return iter(self._resolved())

    def __len__(self) -> int:
        return len(self._resolved())

    def __repr__(self) -> str:
        return f"Reasons({self._resolved()!r})"

    def code(self, gang: str) -> ReasonCode:
        """The stable code of the gang's reason (``ReasonCode``)."""
        return self[gang].code


@dataclass
class Decisions:
    binds: list[Bind] = field(default_factory=list)
    evictions: list[Evict] = field(default_factory=list)
    restarts: list[Restart] = field(default_factory=list)
    failures: list[Fail] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    reasons: Reasons = field(default_factory=Reasons)
    stats: dict[str, float] = field(default_factory=dict)
