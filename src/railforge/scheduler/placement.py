"""All-or-nothing, topology-aware, best-fit placement over a mutable free-capacity view.

``Cluster`` keeps, for the schedulable and ready nodes only, each node's free resources plus
per-domain summaries (free GPUs per NVLink domain, leaf, spine) bucketed by free GPUs, so a gang
is tried first in the smallest and lowest domain that could hold it and rejected cheaply when no
domain can. Node indexes follow node-name order, so every scan is deterministic.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain, compress
from typing import NamedTuple, cast

from railforge.scheduler.model import (
    GPU,
    NO_SCHEDULE_EFFECTS,
    Gang,
    Member,
    Node,
    NodeSelectorRequirement,
    Resources,
    Spread,
    Together,
    Toleration,
    add_resources,
    topology_from_labels,
)

Assignment = list[tuple[str, int]]  # (member name, node index)


class Shape(NamedTuple):
    """Members with identical requests, placed together (a named tuple: one is made per gang, and
    a tuple is made several times faster than a frozen dataclass)."""

    gpu: int
    others: tuple[tuple[str, int], ...]  # non-GPU requests, sorted by resource name
    member_names: tuple[str, ...]

    @property
    def signature(self) -> tuple[int, tuple[tuple[str, int], ...], int]:
        return (self.gpu, self.others, len(self.member_names))


class GangProfile(NamedTuple):
    """Everything decide() needs about a gang that depends only on the gang itself (a named tuple,
    as ``Shape``)."""

    # what admission checks against quotas and limits: the required members' requests, raised to
    # min_resources where that asks for more
    admission: dict[str, int]
    members: tuple[Member, ...]  # the gang's
    gpu: int  # GPUs the gang occupies when fully placed
    required_gpu: int  # GPUs of the required members (quick-rejection bound)
    required_shapes: tuple[Shape, ...]  # largest first
    optional_shapes: tuple[Shape, ...]
    filter_key: int  # node-filter signature (``key_id``): equal keys accept the same nodes
    failure_key: int  # placement-needs signature (``key_id``): equal keys fail to place in the same state
    pins: tuple[tuple[str, str], ...]  # (member, node) in member order when the gang pins its members; else ()
    # the gang's spreads, each as (its ``spread_key``, its members, the Spread, pods it counts per node name);
    # the shapes of its members request one of the key each (``Cluster.spread_view``)
    spreads: tuple[tuple[str, frozenset[str], Spread, dict[str, int]], ...]
    together: Together | None  # the one domain its members share (``Cluster.together_filters``)

    def member_requests(self) -> dict[str, Resources]:
        """Each member's requests by name, built when asked: only a start and a pinned or
        promised placement read them."""
        return {member.name: member.requests for member in self.members}

    @property
    def required_count(self) -> int:
        """How many members are required (the gang's first ones)."""
        return sum(len(shape.member_names) for shape in self.required_shapes)

    @property
    def required_names(self) -> set[str]:
        """The names of the required members."""
        return {name for shape in self.required_shapes for name in shape.member_names}

    @property
    def required_pins(self) -> tuple[tuple[str, str], ...]:
        """The pins of the required members."""
        return self.pins[: self.required_count]


# A colon is in no Kubernetes resource name.
SPREAD_PREFIX = "spread:"


def spread_key(position: int) -> str:
    """The resource a gang's spread number ``position`` stands for in its shapes: one per member it
    spreads, of which each node has the spread's room (``Cluster.spread_view``)."""
    return f"{SPREAD_PREFIX}{position}"


def is_spread_key(name: str) -> bool:
    return name.startswith(SPREAD_PREFIX)


def _others(requests: Resources, spread: Iterable[str] = ()) -> tuple[tuple[str, int], ...]:
    """A pod's non-GPU requests, with one of each ``spread`` key, sorted by resource name (``Shape.others``)."""
    others = [item for item in requests.items() if item[0] != GPU and item[1] > 0]
    others.extend((key, 1) for key in spread)
    others.sort()
    return tuple(others)


def _summed(members: Sequence[Member]) -> dict[str, int]:
    """The members' requests added up."""
    total: dict[str, int] = {}
    for member in members:
        add_resources(total, member.requests)
    return total


def _shapes(members: Sequence[Member], spread: Mapping[str, list[str]]) -> tuple[Shape, ...]:
    """Members grouped by their requests and the spreads (``spread``: member -> spread keys) they are in."""
    if not members:
        return ()
    groups: dict[tuple, list[str]] = {}
    for member in members:
        shape = (member.requests.get(GPU, 0), _others(member.requests, spread.get(member.name, ())))
        groups.setdefault(shape, []).append(member.name)
    shapes = [Shape(gpu, others, tuple(names)) for (gpu, others), names in groups.items()]
    shapes.sort(key=lambda s: (-s.gpu, [(-v, k) for k, v in s.others], s.member_names))
    return tuple(shapes)


# a gang's node selector, required affinity, tolerations and preferred affinity, each sorted
NodeRules = tuple[
    tuple[tuple[str, str], ...],
    tuple[NodeSelectorRequirement, ...],
    tuple[Toleration, ...],
    tuple[NodeSelectorRequirement, ...],
]
NO_NODE_RULES: NodeRules = ((), (), (), ())
# A named tuple built from a tuple of its fields in C: its own constructor is a Python function,
# which costs more than the rest of a one-pod gang's profile (made once per gang).
_new_tuple = tuple.__new__


def failure_key_of(filter_key: int, topology: object, signatures: tuple, required_gpu: int) -> tuple:
    """The structural failure key (``GangProfile.failure_key`` is its ``key_id``): gangs with equal
    keys fail to place in the same state. One shape's signature (most gangs) is spelt out in the
    key, a tuple fewer per gang; such a key has another length than one of several shapes."""
    if len(signatures) == 1:
        return (filter_key, topology, *signatures[0], required_gpu)
    return (filter_key, topology, signatures, required_gpu)


def gang_profile(gang: Gang, key_id: Callable[[tuple], int]) -> GangProfile:
    """Derived gang facts (``Memo.profile`` keeps them per Gang object); ``key_id`` turns the
    structural filter and failure keys into small ints. When every member requests the same (most
    gangs: one pod shape), the shapes and sums are read off the first member."""
    members = gang.members
    count = len(members)
    required = gang.required_members
    first = members[0].requests
    names = (members[0].name,) if count == 1 else tuple([member.name for member in members])
    spreads = gang.spreads
    if not spreads and (count == 1 or [member.requests for member in members].count(first) == count):
        pod_gpu = first.get(GPU, 0)
        others = _others(first)
        if required == count:
            required_shapes: tuple[Shape, ...] = (_new_tuple(Shape, (pod_gpu, others, names)),)
            optional_shapes: tuple[Shape, ...] = ()
        else:
            required_shapes = (Shape(pod_gpu, others, names[:required]),)
            optional_shapes = (Shape(pod_gpu, others, names[required:]),)
        if required > 1:
            admission = {name: amount * required for name, amount in first.items()}
        else:  # the member's read-only requests, copied only to be raised to min_resources below
            admission = dict(first) if gang.min_resources else first  # type: ignore[assignment]  # never changed
        gpu = pod_gpu * count
        signature: tuple | None = (pod_gpu, others, required)
    else:
        in_spreads: dict[str, list[str]] = {}
        for position, spread in enumerate(spreads):
            for name in spread.members:
                in_spreads.setdefault(name, []).append(spread_key(position))
        required_shapes = _shapes(members[:required], in_spreads)
        optional_shapes = _shapes(members[required:], in_spreads)
        admission = _summed(members[:required])
        gpu = _summed(members).get(GPU, 0)
        signatures = tuple([shape.signature for shape in required_shapes])
        signature = signatures[0] if len(signatures) == 1 else None
    if gang.min_resources:
        for name, amount in gang.min_resources.items():
            admission[name] = max(admission.get(name, 0), amount)
    required_gpu = admission.get(GPU, 0)
    rules = NO_NODE_RULES
    if gang.node_selector or gang.affinity or gang.tolerations or gang.preferred_affinity:
        rules = (
            tuple(sorted(gang.node_selector.items())),
            tuple(sorted(gang.affinity, key=repr)),
            tuple(sorted(gang.tolerations, key=repr)),
            tuple(sorted(gang.preferred_affinity, key=repr)),
        )
    filter_key = key_id(rules)
    # placements kept to one domain of a level or of a label: gangs alike in all else fail alike within each
    topology = gang.topology if gang.together is None else (gang.topology, gang.together)
    pins: tuple[tuple[str, str], ...] = ()
    if members[0].node is not None:
        pins = tuple([(member.name, member.node) for member in members if member.node is not None])
        needs = tuple([(member.node, tuple(sorted(member.requests.items()))) for member in members])
        failure_key = key_id((filter_key, topology, required, needs))
    elif spreads:  # the rules and the pods they count set apart gangs whose shapes (and so members) are alike
        kept = tuple((s.max_per_domain, s.max_skew, s.topology_key, s.running, s.required) for s in spreads)
        failure_key = key_id((filter_key, topology, signatures, required_gpu, kept))
    elif signature is not None:  # failure_key_of, without the tuple of one signature
        failure_key = key_id((filter_key, topology, *signature, required_gpu))
    else:
        failure_key = key_id((filter_key, topology, signatures, required_gpu))
    fields = (
        admission,
        members,
        gpu,
        required_gpu,
        required_shapes,
        optional_shapes,
        filter_key,
        failure_key,
        pins,
        tuple(
            (spread_key(position), frozenset(spread.members), spread, dict(spread.running))
            for position, spread in enumerate(spreads)
        ),
        gang.together,
    )
    return _new_tuple(GangProfile, fields)


def node_loads(profile: GangProfile, assignment: Assignment) -> dict[int, dict[str, int]]:
    """What the assigned members request in all on each node index."""
    loads: dict[int, dict[str, int]] = {}
    requests = profile.member_requests()
    for member, index in assignment:
        add_resources(loads.setdefault(index, {}), requests[member])
    return loads


def spread_loads(profile: GangProfile, assignment: Assignment) -> dict[int, dict[str, int]]:
    """``node_loads`` with the spread keys the assigned members take (``spread_key``)."""
    loads = node_loads(profile, assignment)
    if not profile.spreads:
        return loads
    for member, index in assignment:
        for key, members, _, _ in profile.spreads:
            if member in members:
                loads[index][key] = loads[index].get(key, 0) + 1
    return loads


# Why a pinned member can never go to its node (``Cluster.pinned_nodes``)
PIN_PROBLEMS = ("unknown", "ruled-out", "other-domain")

# How a node takes a gang (``Cluster.allowed_nodes``); truthy when the gang may use it.
REJECTS, AVOIDED, ACCEPTS = 0, 1, 2


class Acceptance(list):
    """Per-node ``node_acceptance`` values, noting whether any node is one to avoid."""

    def __init__(self, values: Iterable[int]):
        super().__init__(values)
        self.avoids = AVOIDED in self
        self.rejects = REJECTS in self
        self.together = False  # kept to one domain of a gang's Together (``Cluster.together_filters``)
        self._domain_order: dict[tuple[str, tuple], tuple[bool, bool]] = {}

    def avoided_in(self, level: str, domain: tuple, members: Sequence[int]) -> tuple[bool, bool]:
        """(every node of the domain is one to avoid, some is): the domain's place in the order its level is
        tried; kept, as every gang of this filter asks it again."""
        held = self._domain_order.get((level, domain))
        if held is None:
            avoided = [self[index] == AVOIDED for index in members]
            held = self._domain_order[(level, domain)] = (all(avoided), any(avoided))
        return held


def node_acceptance(node: Node, gang: Gang, broken: list[str]) -> int:
    """Node selector, required node affinity and taints (``broken``: the node's ``broken_rules``
    for the gang): a NoSchedule or NoExecute taint the gang does not tolerate rejects it; a
    PreferNoSchedule one, or a preferred rule the node breaks, makes the node one to avoid."""
    if broken:
        return REJECTS
    avoided = any(taint.effect == "PreferNoSchedule" and not gang.tolerates(taint) for taint in node.taints)
    avoided = avoided or not all(req.matches(node.labels) for req in gang.preferred_affinity)
    return AVOIDED if avoided else ACCEPTS


NODE_RULES = ("node selector", "node affinity", "taints")


def broken_rules(node: Node, gang: Gang) -> list[str]:
    """The gang's ``NODE_RULES`` that keep it off the node."""
    if not (node.taints or gang.node_selector or gang.affinity):
        return []
    labels = node.labels
    broken = []
    if any(labels.get(key) != value for key, value in gang.node_selector.items()):
        broken.append(NODE_RULES[0])
    if not all(req.matches(labels) for req in gang.affinity):
        broken.append(NODE_RULES[1])
    if any(taint.effect in NO_SCHEDULE_EFFECTS and not gang.tolerates(taint) for taint in node.taints):
        broken.append(NODE_RULES[2])
    return broken


def _avoided_last(fitting: Iterable[tuple], level: _Level, allowed: Acceptance) -> Iterator[tuple]:
    """The level's ``fitting`` domains with no node to avoid, in their order and as they come (the first that takes
    the gang ends the search), then those with some such nodes, then those with only such nodes."""
    some: list[tuple] = []
    only: list[tuple] = []
    for domain in fitting:
        every, some_avoided = allowed.avoided_in(level.name, domain, level.members[domain])
        if not some_avoided:
            yield domain
        else:
            (only if every else some).append(domain)
    yield from some
    yield from only


class _Level:
    """Domains of one topology level with their free GPUs, bucketed for best-fit search."""

    __slots__ = ("buckets", "domain_free", "members", "name", "node_domain", "now_free", "sorted_buckets", "values")

    def __init__(
        self,
        name: str,
        node_domain: list[tuple],
        free_gpu: list[int],
        members: dict[tuple, list[int]] | None = None,
    ):
        self.name = name
        self.node_domain = node_domain
        if members is None:
            members = {}
            for index, domain in enumerate(node_domain):
                members.setdefault(domain, []).append(index)
        self.members: dict[tuple, list[int]] = members
        self.now_free: dict[tuple, int] | None = None  # see Cluster.future
        self.domain_free: dict[tuple, int] = {}
        self.buckets: dict[int, set[tuple]] = {}
        self.sorted_buckets: dict[int, list[tuple]] = {}  # free GPUs -> its bucket's domains in order
        buckets = self.buckets
        for domain, indexes in members.items():
            free = 0
            for index in indexes:
                free += free_gpu[index]
            self.domain_free[domain] = free
            bucket = buckets.get(free)
            if bucket is None:
                buckets[free] = {domain}
            else:
                bucket.add(domain)
        self.values = sorted(buckets)

    def change(self, node_index: int, delta: int) -> None:
        domain = self.node_domain[node_index]
        old = self.domain_free[domain]
        new = old + delta
        self.domain_free[domain] = new
        self.sorted_buckets.pop(old, None)
        self.sorted_buckets.pop(new, None)
        bucket = self.buckets[old]
        bucket.discard(domain)
        if not bucket:
            del self.buckets[old]
            self.values.pop(bisect_left(self.values, old))
        if new in self.buckets:
            self.buckets[new].add(domain)
        else:
            self.buckets[new] = {domain}
            insort(self.values, new)

    def best_fit(self, need: int) -> Iterable[tuple]:
        """Domains with at least ``need`` free GPUs, tightest first; among equally tight ones, the
        busiest now first when this is a future view (``Cluster.future``)."""
        values = self.values
        now_free = self.now_free
        for value in values[bisect_left(values, need) :]:
            bucket = self.buckets.get(value)
            if bucket:
                ordered = self.sorted_buckets.get(value)
                if ordered is None:
                    ordered = self.sorted_buckets[value] = sorted(bucket)
                if now_free is not None and len(ordered) > 1:
                    ordered = sorted(ordered, key=now_free.__getitem__)  # stable: by name among equally busy
                yield from ordered

    def best_free(self) -> int:
        return self.values[-1] if self.values else 0


class Static:
    """The parts of a Cluster that depend only on the node list and the topology (level names, and
    the label keys that give a node its path when it has no explicit ``topology``)."""

    __slots__ = (
        "broken_counts",
        "empty",
        "empty_fits",
        "empty_types",
        "filters",
        "free",
        "grouping",
        "index",
        "labelled",
        "level_names",
        "levels",
        "maintenance",
        "node_type",
        "nodes",
        "spans",
        "together",
        "total_gpu",
        "type_allocatable",
    )

    def __init__(self, nodes: Sequence[Node], level_names: tuple[str, ...], label_keys: tuple[str, ...]):
        eligible = sorted((n for n in nodes if n.schedulable and n.ready), key=lambda n: n.name)
        self.nodes = eligible
        self.index = {node.name: i for i, node in enumerate(eligible)}
        self.maintenance: dict[float, list[int]] = {}  # window start -> the nodes held from then on
        for i, node in enumerate(eligible):
            if node.maintenance_from is not None:
                self.maintenance.setdefault(node.maintenance_from, []).append(i)
        self.total_gpu = sum(node.allocatable.get(GPU, 0) for node in eligible)
        # nodes alike in allocatable share a type: each node's type, and each type's allocatable
        self.node_type: list[int] = []
        self.type_allocatable: list[Resources] = []
        types: dict[tuple, int] = {}
        for node in eligible:
            allocatable = tuple(node.allocatable.items())
            kind = types.get(allocatable)
            if kind is None:
                kind = types[allocatable] = len(self.type_allocatable)
                self.type_allocatable.append(node.allocatable)
            self.node_type.append(kind)
        self.level_names = level_names
        self.levels: list[tuple[str, list[tuple], dict[tuple, list[int]]]] = []
        paths = [node.topology or topology_from_labels(node.labels, label_keys) for node in eligible]
        for depth, name in enumerate(level_names):
            node_domain = [_domain_key(node.name, path, depth) for node, path in zip(eligible, paths, strict=True)]
            members: dict[tuple, list[int]] = {}
            for index, domain in enumerate(node_domain):
                members.setdefault(domain, []).append(index)
            self.levels.append((name, node_domain, members))
        # the levels whose domains hold more than one node: a gang spread over several of them fills one first
        self.grouping = [
            depth for depth, (_, _, members) in enumerate(self.levels) if any(len(m) > 1 for m in members.values())
        ]
        # filter key -> per-node acceptance (None: all accept); depends only on the nodes
        self.filters: dict[int, Acceptance | None] = {}
        self.broken_counts: dict[int, dict[str, int]] = {}  # filter key -> nodes each NODE_RULES rule keeps off
        self.empty_fits: dict[int, bool] = {}  # failure key -> fits with nothing running or reserved
        # filter key -> [(allocatable, how many such nodes)] of the nodes the filter lets a gang use
        self.empty_types: dict[int, list[tuple[Resources, int]]] = {}
        self.empty: Cluster | None = None  # the view with nothing running or reserved (Cluster.empty_view)
        # per node: (use version, free resources, free GPUs) of the last view built; the free
        # dicts are shared by views and never changed in place (see Cluster.adjust)
        self.free: list[tuple[int | None, dict[str, int], int] | None] = [None] * len(eligible)
        self.spans: dict[tuple[int, str | None], int] = {}  # see domains_spanned
        self.labelled: dict[str, dict[str, list[int]]] = {}  # see label_domains
        # (filter key, label key) -> per value of the label, the filter kept to its nodes (Cluster.together_filters)
        self.together: dict[tuple[int, str], list[tuple[str, Acceptance]]] = {}

    def label_domains(self, key: str) -> dict[str, list[int]]:
        """The nodes (indexes) of each value of a node label."""
        domains = self.labelled.get(key)
        if domains is None:
            domains = self.labelled[key] = {}
            for index, node in enumerate(self.nodes):
                value = node.labels.get(key)
                if value is not None:
                    domains.setdefault(value, []).append(index)
        return domains

    def label_values(self, key: str) -> tuple[frozenset[str], bool]:
        """The values of a node label on the nodes, and whether some node lacks it."""
        domains = self.label_domains(key)
        return frozenset(domains), sum(len(nodes) for nodes in domains.values()) < len(self.nodes)

    def domains_spanned(self, depth: int, spread: Spread) -> int:
        """The most domains of the spread's key (nodes, or a label's values) one domain of topology level
        ``depth`` spans; its nodes without the label count once each, as each may take any number."""
        key = (depth, spread.topology_key)
        spanned = self.spans.get(key)
        if spanned is None:
            nodes = self.nodes
            spanned = self.spans[key] = max(
                (
                    len({spread.domain(nodes[index]) or nodes[index].name for index in members})
                    for members in self.levels[depth][2].values()
                ),
                default=0,
            )
        return spanned

    def size(self) -> int:
        """Entries its per-gang caches hold."""
        return len(self.filters) + len(self.empty_fits) + len(self.broken_counts) + len(self.empty_types)


def _domain_key(node_name: str, path: tuple[str, ...], depth: int) -> tuple:
    # A node without a label at this depth forms its own domain there.
    return path[: depth + 1] if len(path) > depth else (*path, "node:" + node_name)


def gpu_counts_suffice(profile: GangProfile, total_free_gpu: int, gpu_histogram: Mapping[int, int]) -> bool:
    """Cheap necessary condition for placing the gang: enough free GPUs, and enough nodes with room
    for each pod size (``gpu_histogram``: free GPUs -> number of nodes)."""
    if profile.required_gpu > total_free_gpu:
        return False
    for shape in profile.required_shapes:
        if shape.gpu:
            slots = sum(n * (free // shape.gpu) for free, n in gpu_histogram.items() if free >= shape.gpu)
            if slots < len(shape.member_names):
                return False
    return True


# How many node filters a Cluster keeps its free GPUs summed for (``free_gpu_on``); each costs a
# little in every change of a node's free GPUs.
TRACKED_FILTERS = 8


class _SpreadRoom(NamedTuple):
    """What one of a gang's spreads leaves in each domain of a spread view (``Cluster.spread_view``)."""

    key: str  # its ``spread_key``
    spread: Spread
    cap: int  # members per domain, those counted there included
    running: Mapping[str, int]  # domain -> members counted there already
    unbounded: int  # the room of a node the rule does not count (without its label, or outside a spread's domains)
    caps: Mapping[str, int] | None = None  # per domain, in place of ``cap`` (``water_filled``)

    def counts(self, domain: str | None) -> bool:
        """Whether the rule counts the domain (a node without its label is in none)."""
        return domain is not None and (self.spread.max_skew is None or domain in self.running)

    def left_in(self, domain: str | None) -> int:
        if domain is None or not self.counts(domain):
            return self.unbounded
        return (self.cap if self.caps is None else self.caps[domain]) - self.running.get(domain, 0)

    def left(self, node: Node) -> int:
        return self.left_in(self.spread.domain(node))

    def keeps_skew(self, placed: Mapping[str | None, int]) -> bool:
        """Whether the domains, with ``placed`` (domain -> members) added, keep a topology spread's skew."""
        if self.spread.max_skew is None or not self.running:
            return True
        counts = [count + placed.get(domain, 0) for domain, count in self.running.items()]
        return max(counts) - min(counts) <= self.spread.max_skew


def water_filled(running: Mapping[str, int], count: int, holds: Mapping[str, int] | None = None) -> dict[str, int]:
    """The domains' numbers once ``count`` members are added one by one to the domain holding fewest that
    has room for one more (``holds``: how many each takes; None: any number) — the most even a topology
    spread can end, its fewest raised and its most kept down as far as any placement can. Members no
    domain takes are left out."""
    filled = dict(running)
    heap = [(number, domain) for domain, number in filled.items() if holds is None or holds.get(domain, 0) > 0]
    heapq.heapify(heap)
    for _ in range(count):
        if not heap:
            break
        number, domain = heapq.heappop(heap)
        filled[domain] = number + 1
        if holds is None or filled[domain] - running[domain] < holds.get(domain, 0):
            heapq.heappush(heap, (number + 1, domain))
    return filled


class _SpreadFree:
    """The free resources of a spread view's nodes: a node's, with its room of each spread (a spread over wider
    domains: its domain's), made when a placement first reads it (most read only a few nodes)."""

    __slots__ = ("free", "made", "nodes", "rooms")

    def __init__(self, free: list[dict[str, int]], nodes: Sequence[Node], rooms: list[_SpreadRoom]):
        self.free, self.nodes, self.rooms = free, nodes, rooms
        self.made: dict[int, dict[str, int]] = {}

    def __getitem__(self, index: int) -> dict[str, int]:
        free = self.made.get(index)
        if free is None:
            free = self.made[index] = dict(self.free[index])
            node = self.nodes[index]
            for room in self.rooms:
                free[room.key] = room.left(node)
        return free


class Cluster:
    """Free capacity of the schedulable, ready nodes during one decide() call."""

    def __init__(
        self,
        static: Static,
        used: Mapping[str, dict[str, int]],
        use_version: Mapping[str, int],
        shared: bool = True,
    ):
        """``static``: the node list's view (``Memo.static``); ``used``: resources in use per node
        name; ``use_version``: per node name, a number that changes whenever its ``used`` entry does
        (absent while nothing ever ran there), so the free resources of nodes unchanged since the
        previous view are reused. ``shared=False``: a view apart (the empty view), which neither
        reuses those nor leaves its own for the views to come."""
        eligible = self.nodes = static.nodes
        self.index = static.index
        self.free: list[dict[str, int]] = []
        self.free_gpu: list[int] = []
        cache: list[tuple[int | None, dict[str, int], int] | None] = static.free if shared else [None] * len(eligible)
        for index, node in enumerate(eligible):
            version = use_version.get(node.name)
            cached = cache[index]
            if cached is None or cached[0] != version:
                free = dict(node.allocatable)
                node_used = used.get(node.name)
                if node_used is not None:
                    for name, amount in node_used.items():
                        free[name] = free.get(name, 0) - amount
                cached = cache[index] = (version, free, free.get(GPU, 0))
            self.free.append(cached[1])
            self.free_gpu.append(cached[2])
        self.owned: set[int] = set()  # nodes whose free dict this view alone holds (see adjust)
        self.total_free_gpu = sum(self.free_gpu)
        # free GPUs -> the nodes with that many free: scans for pods that need GPUs read only the
        # nodes that have them free, not every node of a full cluster
        self.gpu_nodes: dict[int, set[int]] = {}
        for index, free_gpu in enumerate(self.free_gpu):
            held = self.gpu_nodes.get(free_gpu)
            if held is None:
                self.gpu_nodes[free_gpu] = {index}
            else:
                held.add(index)
        self.gpu_histogram: dict[int, int] = {}  # free GPUs -> number of nodes
        for free_gpu in self.free_gpu:
            self.gpu_histogram[free_gpu] = self.gpu_histogram.get(free_gpu, 0) + 1
        # GPUs per pod -> pods of that size the free GPUs hold, node by node (``could_fit``); worked
        # out from the histogram on first use and forgotten whenever it changes (``adjust``)
        self.gpu_slots: dict[int, int] = {}
        # id of a node filter -> [the filter, free GPUs on the nodes it accepts] (``free_gpu_on``)
        self.filter_free_gpu: dict[int, list] = {}
        self.total_gpu = static.total_gpu
        self.now_free_gpu: list[int] | None = None  # see future()
        self.reserved_start = [math.inf] * len(eligible)  # earliest reservation start per node
        # node -> reserved (start, end, resources): amounts held for a reserved gang in its window
        self.windows: dict[int, list[tuple[float, float, Resources]]] = {}
        self.level_names = static.level_names
        self.levels = [
            _Level(name, node_domain, self.free_gpu, members) for name, node_domain, members in static.levels
        ]
        self._static = static
        self._filters = static.filters
        self._grouping = static.grouping
        self._empty_fits = static.empty_fits
        self.spread_for: GangProfile | None = None  # see spread_view
        # the spread view's rules that a node's room does not keep alone: spreads over domains wider than a
        # node, and topology spreads (``_keeps_domains``)
        self.domain_rooms: tuple[_SpreadRoom, ...] = ()

    def spread_view(
        self,
        profile: GangProfile,
        preferred: bool,
        holds: Mapping[str, Mapping[str, int]] | None = None,
    ) -> Cluster:
        """A copy in which every node has free, as resource ``spread_key``, the room of each of the
        gang's spreads there (``preferred``: of the preferences too; else they leave room for every
        member; less the pods each counts there already, but in the empty view): the shapes of the members
        request one each, so every placement and count below keeps the spreads on nodes without knowing
        of them. A spread over wider domains gives each node its domain's room, and the fill and the
        checks of a placement (``_fill``, ``holds``, ``_place_exactly``) keep the domain's total. A
        topology spread's domains take at most the fewest they can end with plus the skew, each
        (``holds``: per spread key, how many each domain holds; then exactly what ``water_filled`` gives
        them, which keeps the skew whatever the fill); ``place`` keeps only placements that keep the skew.
        Only what changes nothing is asked of it (``place``, ``fits``, ``holds``): it shares all but the free
        resources with this view."""
        view = object.__new__(Cluster)
        view.__dict__.update(self.__dict__)
        view.spread_for = profile
        unbounded = len(profile.members)
        required = profile.required_names
        rooms = []
        for key, members, spread, running in profile.spreads:
            counts = dict.fromkeys(running, 0) if self is self._static.empty else running
            if not (spread.required or preferred):
                rooms.append(_SpreadRoom(key, spread, unbounded, {}, unbounded))
            elif spread.max_skew is None:
                rooms.append(_SpreadRoom(key, spread, cast(int, spread.max_per_domain), counts, unbounded))
            else:
                filled = water_filled(counts, len(required & members))
                cap = min(filled.values(), default=0) + spread.max_skew
                even = None if holds is None else water_filled(counts, len(required & members), holds[key])
                rooms.append(_SpreadRoom(key, spread, cap, counts, unbounded, even))
        view.free = cast(list, _SpreadFree(self.free, self.nodes, rooms))
        view.domain_rooms = tuple(
            room for room in rooms if room.spread.topology_key is not None or room.spread.max_skew is not None
        )
        return view

    def _spread_views(
        self, profile: GangProfile, allowed: Acceptance | None, window: tuple[float, float]
    ) -> Iterator[Cluster]:
        """The spread views ``place`` tries in turn: every spread kept, then the required ones only; each
        then with its topology spreads evened out over what their domains hold."""
        holds = None
        for preferred in (True, False):
            if not preferred and all(spread.required for _, _, spread, _ in profile.spreads):
                return
            yield self.spread_view(profile, preferred)
            if any(spread.max_skew is not None and (spread.required or preferred) for *_, spread, _ in profile.spreads):
                if holds is None:
                    holds = {
                        key: self._domain_holds(profile, spread, allowed, window)
                        for key, _, spread, _ in profile.spreads
                        if spread.max_skew is not None
                    }
                yield self.spread_view(profile, preferred, holds=holds)

    def _domain_holds(
        self, profile: GangProfile, spread: Spread, allowed: Acceptance | None, window: tuple[float, float]
    ) -> Counter:
        """At most how many of the spread's members each domain takes: what its nodes the gang may use hold of
        the pods of each of its shapes for the gang's run ``window``, the shapes taken alone and summed."""
        shapes = [
            Shape(gpu, tuple((name, each) for name, each in others if not is_spread_key(name)), names)
            for gpu, others, names in (*profile.required_shapes, *profile.optional_shapes)
            if names[0] in spread.members
        ]
        holds: Counter = Counter()
        for index, node in enumerate(self.nodes):
            if allowed is None or allowed[index]:
                holds[spread.domain(node)] += sum(self._pods_fit(index, shape, window, None) for shape in shapes)
        return holds

    def _domain_left(self, index: int, count: int, others: Iterable[tuple[str, int]], taken: Mapping) -> int:
        """``count`` members of a shape (``others``: its requests), at most as many as the domains of the node
        ``index`` still take beside what ``taken`` (node index -> requests) puts in them."""
        node = self.nodes[index]
        spreads = {key for key, _ in others}
        for room in self.domain_rooms:
            if room.key in spreads:
                domain = room.spread.domain(node)
                used = sum(
                    load.get(room.key, 0)
                    for other, load in taken.items()
                    if room.spread.domain(self.nodes[other]) == domain
                )
                count = min(count, room.left_in(domain) - used)
        return max(count, 0)

    def _kept(self, profile: GangProfile, assignment: Assignment) -> Assignment | None:
        """The placement when it keeps every rule of ``domain_rooms``; else its required members' when those do
        (the optional ones left out); else None."""
        if self._keeps_domains(spread_loads(profile, assignment)):
            return assignment
        required = assignment[: profile.required_count]
        return required if self._keeps_domains(spread_loads(profile, required)) else None

    def _domain_tags(self, indexes: Iterable[int]) -> dict[int, tuple[int, ...]]:
        """Each node's domains under ``domain_rooms``, numbered (the same number: the same domain)."""
        numbers: dict[tuple, int] = {}
        return {
            index: tuple(
                numbers.setdefault((position, room.spread.domain(self.nodes[index])), len(numbers))
                for position, room in enumerate(self.domain_rooms)
            )
            for index in indexes
        }

    def _keeps_domains(self, taken: Mapping[int, Mapping[str, int]]) -> bool:
        """Whether members placed as ``taken`` (node index -> requests) stay within every domain's room, and
        keep every topology spread's skew."""
        for room in self.domain_rooms:
            placed: Counter = Counter()
            for index, load in taken.items():
                placed[room.spread.domain(self.nodes[index])] += load.get(room.key, 0)
            if any(count > room.left_in(domain) for domain, count in placed.items()) or not room.keeps_skew(placed):
                return False
        return True

    def _spread(self, profile: GangProfile) -> Cluster | None:
        """The view that keeps the gang's required spreads, when it has any and this is not one (in the
        empty view, nothing runs to count)."""
        if not profile.spreads or self.spread_for is not None:
            return None
        return self.spread_view(profile, preferred=False)

    def future(self) -> Cluster:
        """A copy in which to replay expected releases and find a reservation's nodes. Among nodes
        (and domains) that fit equally tightly then, it picks the ones busiest now: holding nodes
        that are idle now would keep them from backfill until the reserved start."""
        clone = self.copy()
        clone.now_free_gpu = self.free_gpu
        for level, copied in zip(self.levels, clone.levels, strict=True):
            copied.now_free = level.domain_free
        return clone

    def copy(self) -> Cluster:
        """Independent copy of the mutable capacity state (shares the immutable node data)."""
        clone = object.__new__(Cluster)
        clone.__dict__.update(self.__dict__)
        clone.free = list(self.free)
        clone.owned = set()
        self.owned = set()  # the free dicts are shared now: both views copy before changing one
        clone.free_gpu = list(self.free_gpu)
        clone.gpu_histogram = dict(self.gpu_histogram)
        clone.gpu_slots = dict(self.gpu_slots)
        clone.filter_free_gpu = {}
        clone.gpu_nodes = {free_gpu: set(indexes) for free_gpu, indexes in self.gpu_nodes.items()}
        clone.reserved_start = list(self.reserved_start)
        clone.windows = {index: list(windows) for index, windows in self.windows.items()}
        clone.levels = []
        for level in self.levels:
            copied = object.__new__(_Level)
            copied.name = level.name
            copied.node_domain = level.node_domain
            copied.members = level.members
            copied.domain_free = dict(level.domain_free)
            copied.buckets = {value: set(domains) for value, domains in level.buckets.items()}
            copied.values = list(level.values)
            copied.sorted_buckets = dict(level.sorted_buckets)  # its lists are never changed in place
            copied.now_free = level.now_free
            clone.levels.append(copied)
        return clone

    def label_domains(self, key: str) -> dict[str, list[int]]:
        """The nodes (indexes) of each value of a node label (``Static.label_domains``)."""
        return self._static.label_domains(key)

    def together_filters(self, profile: GangProfile, allowed: Acceptance | None) -> list[Acceptance]:
        """For a gang whose members share one domain (``Together``): ``allowed`` kept to the nodes of one value
        of its label each: those with no node it avoids first, then those with some, then those with only
        such (as ``_avoided_last``); among them, those whose nodes it may use have the fewest free GPUs that
        still reach its required GPUs first (best fit), in value order among equals."""
        key = profile.together.topology_key if profile.together else ""
        filters = self._static.together.get((profile.filter_key, key))
        if filters is None:
            filters = self._static.together[(profile.filter_key, key)] = []
            for value, members in sorted(self._static.label_domains(key).items()):
                inside = set(members)
                accepted = Acceptance(
                    (ACCEPTS if allowed is None else allowed[index]) if index in inside else REJECTS
                    for index in range(len(self.nodes))
                )
                accepted.together = True
                filters.append((value, accepted))
        free = self.free_gpu
        domains = self._static.label_domains(key)
        ranked = []
        for value, accepted in filters:
            usable = [index for index in domains[value] if accepted[index]]
            held = sum(free[index] for index in usable)
            if held >= profile.required_gpu:
                avoided = [accepted[index] == AVOIDED for index in usable]
                ranked.append((all(avoided) + any(avoided), held, value, accepted))
        ranked.sort(key=lambda entry: entry[:3])
        return [accepted for *_, accepted in ranked]

    def allowed_nodes(self, gang: Gang, profile: GangProfile) -> Acceptance | None:
        """Per-node ``node_acceptance`` for the gang's filters; None when every node accepts it
        without reserve."""
        key = profile.filter_key
        if key not in self._filters:
            counts = dict.fromkeys(NODE_RULES, 0)
            values = []
            labelled = bool(gang.node_selector or gang.affinity or gang.preferred_affinity)
            for node in self.nodes:
                if not (labelled or node.taints):  # no rule can keep it off, none to avoid
                    values.append(ACCEPTS)
                    continue
                broken = broken_rules(node, gang)
                for rule in broken:
                    counts[rule] += 1
                values.append(node_acceptance(node, gang, broken))
            accepted = Acceptance(values)
            self._filters[key] = None if all(a == ACCEPTS for a in accepted) else accepted
            self._static.broken_counts[key] = counts
        return self._filters[key]

    def free_gpu_on(self, allowed: Acceptance) -> int:
        """Free GPUs summed over the nodes a node filter accepts. The sums of the first few
        filters asked about are kept up to date by ``adjust`` (a cluster full but for a few GPUs
        changes a handful of nodes between two reasons, and most gangs share a few filters)."""
        held = self.filter_free_gpu.get(id(allowed))
        if held is not None:
            return held[1]
        total = sum(compress(self.free_gpu, allowed))
        if len(self.filter_free_gpu) < TRACKED_FILTERS:
            self.filter_free_gpu[id(allowed)] = [allowed, total]  # holds the filter, so its id stays its own
        return total

    def broken_rule_counts(self, gang: Gang, profile: GangProfile) -> dict[str, int]:
        """How many nodes each of ``NODE_RULES`` keeps the gang off (counted with ``allowed_nodes``)."""
        self.allowed_nodes(gang, profile)
        return self._static.broken_counts[profile.filter_key]

    def adjust(self, node_index: int, requests: Resources, sign: int) -> None:
        """Take (sign=-1) or give back (sign=+1) ``requests`` on one node."""
        free = self.free[node_index]
        if node_index not in self.owned:  # shared with another view or the node cache: copy on write
            free = self.free[node_index] = dict(free)
            self.owned.add(node_index)
        for name, amount in requests.items():
            free[name] = free.get(name, 0) + sign * amount
        gpu = requests.get(GPU, 0)
        if gpu:
            if self.gpu_slots:
                self.gpu_slots = {}
            histogram = self.gpu_histogram
            old = self.free_gpu[node_index]
            histogram[old] -= 1
            histogram[old + sign * gpu] = histogram.get(old + sign * gpu, 0) + 1
            self.free_gpu[node_index] = old + sign * gpu
            nodes = self.gpu_nodes[old]
            nodes.discard(node_index)
            if not nodes:
                del self.gpu_nodes[old]
            self.gpu_nodes.setdefault(old + sign * gpu, set()).add(node_index)
            self.total_free_gpu += sign * gpu
            for level in self.levels:
                level.change(node_index, sign * gpu)
            for held in self.filter_free_gpu.values():
                if held[0][node_index]:
                    held[1] += sign * gpu

    def reserve(self, holds: Mapping[int, Resources], start: float, end: float) -> None:
        """Hold ``holds[node]`` resources on each node for [start, end): a later placement whose run
        window overlaps that one may use only what is free now beyond the held amounts (free now is
        never more than what will be free at ``start``, so the reserved gang still fits then)."""
        for index, resources in holds.items():
            self.reserved_start[index] = min(start, self.reserved_start[index])
            self.windows.setdefault(index, []).append((start, end, dict(resources)))

    def reservation_ends(self) -> set[float]:
        return {end for windows in self.windows.values() for _, end, _ in windows}

    def _held(self, index: int, start: float, end: float) -> dict[str, int] | None:
        """Resources held on the node by reservations whose window overlaps [start, end)."""
        held: dict[str, int] | None = None
        for held_start, held_end, resources in self.windows[index]:
            if start < held_end and held_start < end:
                if held is None:
                    held = {}
                for name, amount in resources.items():
                    held[name] = held.get(name, 0) + amount
        return held

    def fits_when_empty(
        self, profile: GangProfile, allowed: Acceptance | None, finest_level: int, widest_level: int
    ) -> bool:
        """Whether the gang could be placed with nothing running and nothing reserved: False only
        when that is proved (an exact search that ran out of its budget proves nothing); worked out
        once per placement class while the node list stays the same."""
        fits = self._empty_fits.get(profile.failure_key)
        if fits is None and profile.pins:
            placed = self.empty_view().place_pinned(profile, allowed, (0.0, 0.0), widest_level)
            fits = self._empty_fits[profile.failure_key] = placed is not None
        alone = not (profile.spreads or profile.together)
        if fits is None and widest_level < 0 and len(profile.required_shapes) == 1 and alone:
            fits = self._empty_fits[profile.failure_key] = self._one_shape_fits_empty(profile, allowed)
        if fits is None:
            empty = self.empty_view()
            window = (0.0, 0.0)
            fits = empty.fits(profile, allowed, window, finest_level, widest_level)
            searchable = len(profile.required_shapes) > 1 or profile.spreads
            if not fits and searchable:  # a search out of its budget proves nothing
                searched = empty._spread(profile) or empty  # the search keeps the spreads too
                filters = empty.together_filters(profile, allowed) if profile.together else [allowed]
                fits = any(not searched._place_exactly(profile, kept, window, widest_level)[1] for kept in filters)
            self._empty_fits[profile.failure_key] = fits
        return fits

    def fits(
        self,
        profile: GangProfile,
        allowed: Acceptance | None,
        window: tuple[float, float],
        finest_level: int,
        widest_level: int,
    ) -> bool:
        """Whether ``place`` places the gang; for a gang whose required pods have one shape, found
        without placing it (``_one_shape_fits``)."""
        spread = self._spread(profile)
        if profile.together is not None or (spread is not None and spread.domain_rooms):
            # a domain at a time, or a fill that may break a domain's rule: only a placement tells
            return self.place(profile, allowed, window, finest_level, widest_level) is not None
        if spread is not None:
            return spread.fits(profile, allowed, window, finest_level, widest_level)
        if profile.pins:
            return self.place_pinned(profile, allowed, window, widest_level) is not None
        if len(profile.required_shapes) == 1:
            return self._one_shape_fits(profile, allowed, window, widest_level)
        return self.place(profile, allowed, window, finest_level, widest_level) is not None

    def _one_shape_fits(
        self, profile: GangProfile, allowed: Acceptance | None, window: tuple[float, float], widest_level: int
    ) -> bool:
        """For one shape of required pods the greedy fill is exact: a domain holds the gang when its
        nodes hold as many such pods. A finer domain that holds it lies in a domain of the widest
        level that holds it too, so only the widest level's domains (or the whole cluster) are
        counted."""
        if not self._may_fit(profile, allowed, window, widest_level):
            return False
        if widest_level < 0:
            return True  # the whole cluster holds as many pods as _slots_suffice counted
        shape = profile.required_shapes[0]
        count = len(shape.member_names)
        level = self.levels[widest_level]
        for domain in level.best_fit(profile.required_gpu):
            slots = 0
            for index in level.members[domain]:
                if allowed is None or allowed[index]:
                    slots += self._pods_fit(index, shape, window, None)
                    if slots >= count:
                        return True
        return False

    def _one_shape_fits_empty(self, profile: GangProfile, allowed: Acceptance | None) -> bool:
        """``fits`` in the empty view, for a gang whose required pods have one shape and which may
        spread over the whole cluster: the nodes it may use, counted once per allocatable, hold as
        many such pods."""
        if profile.required_gpu > self.total_gpu:
            return False
        static = self._static
        types = static.empty_types.get(profile.filter_key)
        if types is None:  # nodes counted per type in C
            counts = Counter(static.node_type if allowed is None else compress(static.node_type, allowed))
            types = static.empty_types[profile.filter_key] = [
                (static.type_allocatable[kind], nodes) for kind, nodes in counts.items()
            ]
        gpu, others, names = profile.required_shapes[0]
        count = len(names)
        slots = 0
        for free, nodes in types:
            fits = free.get(GPU, 0) // gpu if gpu else count
            for name, amount in others:
                room = free.get(name, 0) // amount
                if room < fits:
                    fits = room
            if fits > 0:
                slots += nodes * fits
                if slots >= count:
                    return True
        return False

    def empty_view(self) -> Cluster:
        """A view of the nodes with nothing running or reserved, built once per node list (only
        ``place``, which changes nothing, is asked of it)."""
        empty = self._static.empty
        if empty is None:
            empty = self._static.empty = Cluster(self._static, {}, {}, shared=False)
        return empty

    def could_fit(self, profile: GangProfile) -> bool:
        """``gpu_counts_suffice`` in this view, with the pod slots per pod size kept until the free
        GPUs change: most gangs tried between two binds ask about the same few pod sizes."""
        if profile.required_gpu > self.total_free_gpu:
            return False
        known = self.gpu_slots
        for shape in profile.required_shapes:
            gpu = shape.gpu
            if gpu:
                slots = known.get(gpu)
                if slots is None:
                    slots = known[gpu] = sum(n * (free // gpu) for free, n in self.gpu_histogram.items() if free >= gpu)
                if slots < len(shape.member_names):
                    return False
        return True

    def nodes_with_gpus(self, gpus: int) -> Iterable[int]:
        """The nodes with at least ``gpus`` GPUs free, in no particular order."""
        return chain.from_iterable(nodes for free_gpu, nodes in self.gpu_nodes.items() if free_gpu >= gpus)

    def place(
        self,
        profile: GangProfile,
        allowed: Acceptance | None,
        window: tuple[float, float],
        finest_level: int,
        widest_level: int,
    ) -> Assignment | None:
        """Find nodes for the gang without changing state.

        Levels are tried from ``finest_level`` down to ``widest_level`` (index into the topology
        levels; -1 means the whole cluster). A node is usable only when the gang's run ``window``
        (start, end) overlaps none of the node's reservations. Domains holding a node the gang
        avoids are tried after the others of their level, those holding only such nodes last. When
        this greedy fill (largest pods first, best fit) misses, an exact search looks for a
        placement it missed (``_place_exactly``).
        A gang that pins its members goes where they name (``place_pinned``). A gang with spreads is
        placed in its ``spread_view``, keeping its preferences where it can.
        """
        if profile.together is not None and not profile.pins and not (allowed is not None and allowed.together):
            # a domain at a time (pinned members: ``holds`` keeps them to one)
            for kept in self.together_filters(profile, allowed):
                placed = self.place(profile, kept, window, finest_level, widest_level)
                if placed is not None:
                    return placed
            return None
        if profile.spreads and self.spread_for is None:
            for view in self._spread_views(profile, allowed, window):
                placed = view.place(profile, allowed, window, finest_level, widest_level)
                if placed is not None:
                    return placed
            return None
        if profile.pins:
            return self.place_pinned(profile, allowed, window, widest_level)
        if not self._may_fit(profile, allowed, window, widest_level):
            return None
        need = profile.required_gpu
        avoids = allowed is not None and allowed.avoids
        # A start spans as few inner domains as it can. A reservation's nodes (a future view) are
        # a plan: it holds the nodes busiest now instead, so idle ones stay open to backfill.
        grouping = self._grouping if self.now_free_gpu is None else ()
        needed = self._domains_needed(profile) if self.domain_rooms else 1
        spans = self._static.domains_spanned
        for depth in range(finest_level, widest_level - 1, -1):
            if needed > 1 and depth >= 0 and needed > min(spans(depth, room.spread) for room in self.domain_rooms):
                continue  # a domain of this level spans too few of the spread's domains
            inner = [self.levels[finer] for finer in grouping if finer > depth]
            if depth < 0:
                domains: Iterable[Sequence[int]] = [range(len(self.nodes))]
            else:
                level = self.levels[depth]
                fitting: Iterable[tuple] = level.best_fit(need)
                if avoids and allowed is not None:
                    fitting = _avoided_last(fitting, level, allowed)
                domains = (level.members[domain] for domain in fitting)
            for node_indexes in domains:
                if self.domain_rooms and not self._domains_suffice(profile, allowed, node_indexes):
                    continue  # too few of the spread's domains in this one
                placed = self._place_in(node_indexes, profile, allowed, window, inner)
                if placed is not None and self.domain_rooms:
                    placed = self._kept(profile, placed)
                if placed is not None:
                    return placed
        return self._place_exactly(profile, allowed, window, widest_level)[0]

    def position(self, node_name: str) -> int | None:
        """The node's index in this view; None when it is not a schedulable, ready node."""
        return self._static.index.get(node_name)

    def pinned_nodes(
        self, profile: GangProfile, allowed: Acceptance | None, widest_level: int
    ) -> tuple[Assignment, tuple[str, str, str] | None]:
        """The pinned members with their nodes' indexes, and the first pin no placement can honour as
        (member, node, one of ``PIN_PROBLEMS``): its node is not in this view (schedulable and ready),
        the gang's node rules rule it out, or it lies in another domain of the required topology
        level than the first pin's node."""
        assignment: Assignment = []
        first_domain = None
        for member, node in profile.pins:
            position = self.position(node)
            if position is None:
                return assignment, (member, node, PIN_PROBLEMS[0])
            if allowed is not None and not allowed[position]:
                return assignment, (member, node, PIN_PROBLEMS[1])
            if widest_level >= 0:
                domain = self.levels[widest_level].node_domain[position]
                if first_domain is None:
                    first_domain = domain
                elif domain != first_domain:
                    return assignment, (member, node, PIN_PROBLEMS[2])
            assignment.append((member, position))
        return assignment, None

    def place_pinned(
        self, profile: GangProfile, allowed: Acceptance | None, window: tuple[float, float], widest_level: int
    ) -> Assignment | None:
        """``place`` for a gang that pins its members: each on the node it names (``pinned_nodes``
        must find no problem); the required members must all fit there for their run ``window``, an
        optional one joins when it fits beside them. As for any gang, the cluster must have its
        required GPUs free (``could_fit``: ``min_resources`` may ask more than its pods)."""
        if not self.could_fit(profile):
            return None
        assignment, problem = self.pinned_nodes(profile, allowed, widest_level)
        if problem is not None:
            return None
        required = len(profile.required_pins)
        placed = assignment[:required]
        if not self.holds(profile, placed, allowed, window):
            return None
        for optional in assignment[required:]:
            if self.holds(profile, [*placed, optional], allowed, window):
                placed.append(optional)
        return placed

    def _may_fit(
        self, profile: GangProfile, allowed: Acceptance | None, window: tuple[float, float], widest_level: int
    ) -> bool:
        """The cheap necessary conditions, in GPU counts then pod slots: False when no placement is
        possible."""
        if not self.could_fit(profile):
            return False
        if widest_level >= 0 and self.levels[widest_level].best_free() < profile.required_gpu:
            return False
        return self._domains_suffice(profile, allowed) and self._slots_suffice(profile, allowed, window)

    def _counts_every_node(self, room: _SpreadRoom) -> bool:
        """Whether every node is in a domain the rule counts (none takes any number)."""
        key = room.spread.topology_key
        if key is None:
            return room.spread.max_skew is None or all(node.name in room.running for node in self.nodes)
        values, unlabelled = self._static.label_values(key)
        return not unlabelled and (room.spread.max_skew is None or values <= room.running.keys())

    def _domains_needed(self, profile: GangProfile) -> int:
        """The fewest domains of its spreads over wider domains the gang's required members land in: for one
        rule, its required members over the most a domain has left; 1 where some node is in no domain it
        counts (such a node takes any number)."""
        required = profile.required_names
        needed = 1
        for room in self.domain_rooms:
            count = len(required.intersection(room.spread.members))
            if not count or not self._counts_every_node(room):
                continue
            most = max((room.left_in(domain) for domain in room.running), default=0)
            if room.spread.max_skew is None:
                most = max(most, room.cap)  # in a domain where it counts nothing
            needed = max(needed, -(-count // most) if most > 0 else len(self.nodes) + 1)
        return needed

    def _domains_suffice(
        self, profile: GangProfile, allowed: Acceptance | None, node_indexes: Iterable[int] | None = None
    ) -> bool:
        """Necessary for placing the gang (on ``node_indexes``; None: anywhere): each rule of ``domain_rooms``
        has room left, summed over the domains of the nodes the gang may use, for its required members (unless
        one of them is a domain it does not count, which takes any number)."""
        if not self.domain_rooms:
            return True
        required = profile.required_names
        indexes = range(len(self.nodes)) if node_indexes is None else node_indexes
        usable = [self.nodes[index] for index in indexes if allowed is None or allowed[index]]
        everywhere = node_indexes is None and allowed is None
        for room in self.domain_rooms:
            key = room.spread.topology_key
            if everywhere and key is not None:  # every node's: known per label
                values, unlabelled = self._static.label_values(key)
                domains: set[str | None] = {*values, None} if unlabelled else set(values)
            else:
                domains = {room.spread.domain(node) for node in usable}
            if not all(room.counts(domain) for domain in domains):
                continue
            left = sum(max(room.left_in(domain), 0) for domain in domains)
            if len(required.intersection(room.spread.members)) > left:
                return False
        return True

    def _slots_suffice(self, profile: GangProfile, allowed: Acceptance | None, window: tuple[float, float]) -> bool:
        """Necessary for placing the gang, and cheaper to refute than trying every domain: for
        each shape of its required pods, taken alone, the nodes it may use hold as many such pods."""
        every = range(len(self.nodes))
        end = window[1]
        reserved_start, free_gpu, free = self.reserved_start, self.free_gpu, self.free
        for shape in profile.required_shapes:
            gpu, others, count = shape.gpu, shape.others, len(shape.member_names)
            slots = 0
            # only nodes with the shape's GPUs free now can hold one of its pods
            for index in self.nodes_with_gpus(gpu) if gpu else every:
                if allowed is not None and not allowed[index]:
                    continue
                if reserved_start[index] < end:  # a reservation may hold part of it
                    slots += self._pods_fit(index, shape, window, None)
                else:  # _pods_fit without reservations, inline: this loop runs for most tries
                    fits = free_gpu[index] // gpu if gpu else count
                    node_free = free[index]
                    for name, amount in others:
                        if fits <= 0:
                            break
                        room = node_free.get(name, 0) // amount
                        if room < fits:
                            fits = room
                    if fits > 0:
                        slots += fits
                if slots >= count:
                    break
            if slots < count:
                return False
        return True

    def _pods_fit(
        self, index: int, shape: Shape, window: tuple[float, float], already: Mapping[str, int] | None
    ) -> int:
        """How many of the shape's pods the node holds for their run ``window`` (at most all of
        them), beside reservations overlapping it and what ``already`` takes there."""
        start, end = window
        held = self._held(index, start, end) if self.reserved_start[index] < end else None
        gpu = shape.gpu
        fits = len(shape.member_names)
        if gpu:
            room_gpu = self.free_gpu[index] - (already.get(GPU, 0) if already else 0)
            fits = (room_gpu - (held.get(GPU, 0) if held else 0)) // gpu
        node_free = self.free[index]
        for name, amount in shape.others:
            if fits <= 0:
                return 0
            room = node_free.get(name, 0) - (already.get(name, 0) if already else 0)
            if held:
                room -= held.get(name, 0)
            fits = min(fits, room // amount)
        return max(fits, 0)

    def _place_exactly(
        self, profile: GangProfile, allowed: Acceptance | None, window: tuple[float, float], widest_level: int
    ) -> tuple[Assignment | None, bool]:
        """The exact search behind the greedy fill of ``place``, in every domain of the widest
        level; with whether a miss is proved (False when a search ran out of its budget). The
        greedy fill is exact already for a gang whose required pods all have one shape: it counts,
        node by node, how many such pods fit. With several shapes it can put a pod where another
        needed to go; with a rule over domains (``domain_rooms``), in a domain another needed, and a
        node no such rule counts may be where one pod of one shape had to go."""
        if len(profile.required_shapes) < 2 and all(self._counts_every_node(room) for room in self.domain_rooms):
            return None, True  # the fill kept to each domain's room, and the evened view, are exact for one shape
        if not self._domains_suffice(profile, allowed):
            return None, True
        if widest_level < 0:
            domains: Iterable[Sequence[int]] = [range(len(self.nodes))]
        else:
            level = self.levels[widest_level]
            domains = [level.members[domain] for domain in level.best_fit(profile.required_gpu)]
        proved = True
        for node_indexes in domains:
            rooms = self.rooms(node_indexes, allowed, window)
            if self.domain_rooms:  # nodes of different domains are not alike; a placement must keep every domain's rule
                search = ExactSearch(
                    profile.required_shapes,
                    rooms,
                    self._domain_tags(rooms),
                    lambda found: self._keeps_domains(spread_loads(profile, found)),
                )
            else:
                search = ExactSearch(profile.required_shapes, rooms)
            required = search.run()
            if required is None:
                proved = proved and search.complete
                continue
            taken = spread_loads(profile, required)
            for shape in profile.optional_shapes:
                self._fill(shape, node_indexes, allowed, window, [], taken, required, required=False)
            return (self._kept(profile, required) if self.domain_rooms else required), True
        return None, proved

    def holds(
        self, profile: GangProfile, assignment: Assignment, allowed: Acceptance | None, window: tuple[float, float]
    ) -> bool:
        """Whether the members fit where ``assignment`` puts them for their run ``window``."""
        if profile.together is not None:
            values = {self.nodes[index].labels.get(profile.together.topology_key) for _, index in assignment}
            if len(values) != 1 or None in values:
                return False
        spread = self._spread(profile)
        if spread is not None:
            return spread.holds(profile, assignment, allowed, window)
        taken = spread_loads(profile, assignment)
        rooms = self.rooms(taken, allowed, window)
        return all(
            index in rooms and all(rooms[index].get(name, 0) >= amount for name, amount in needed.items())
            for index, needed in taken.items()
        ) and self._keeps_domains(taken)

    def rooms(
        self, node_indexes: Iterable[int], allowed: Acceptance | None, window: tuple[float, float]
    ) -> dict[int, Resources]:
        """What each node the gang may use has free for its run ``window``: free now, less what
        reservations overlapping the window hold there."""
        start, end = window
        rooms: dict[int, Resources] = {}
        for index in node_indexes:
            if allowed is not None and not allowed[index]:
                continue
            room = self.free[index]
            if self.reserved_start[index] < end:
                held = self._held(index, start, end)
                if held:
                    room = {name: room.get(name, 0) - held.get(name, 0) for name in room.keys() | held.keys()}
            rooms[index] = room
        return rooms

    def _place_in(
        self,
        node_indexes: Iterable[int],
        profile: GangProfile,
        allowed: Acceptance | None,
        window: tuple[float, float],
        inner: list[_Level],
    ) -> Assignment | None:
        """``inner``: the finer levels whose domains group nodes; see ``_fill``."""
        taken: dict[int, dict[str, int]] = {}
        assignment: Assignment = []
        for shape in profile.required_shapes:
            if not self._fill(shape, node_indexes, allowed, window, inner, taken, assignment, required=True):
                return None
        for shape in profile.optional_shapes:
            self._fill(shape, node_indexes, allowed, window, inner, taken, assignment, required=False)
        return assignment

    def _fill(
        self,
        shape: Shape,
        node_indexes: Iterable[int],
        allowed: Acceptance | None,
        window: tuple[float, float],
        inner: list[_Level],
        taken: dict[int, dict[str, int]],
        assignment: Assignment,
        required: bool,
    ) -> bool:
        """Best-fit: put members on the nodes with the fewest free GPUs that still hold them, nodes
        the gang already uses first (an MPI launcher joins its workers: the gang spans fewer
        nodes and a node failure stops fewer gangs), then nodes it does not avoid (``AVOIDED``: its
        preferences outrank the grouping that follows). A gang placed over several ``inner`` domains
        fills the one with the most free GPUs first, so it spans as few of them as it can."""
        gpu, others, names = shape.gpu, shape.others, shape.member_names
        free_gpu, free, reserved_start, now_free = self.free_gpu, self.free, self.reserved_start, self.now_free_gpu
        start, end = window
        found = []  # (node index, pods it holds, its free GPUs for the window, whether the gang is not on it yet)
        holds = 0
        for index in node_indexes:
            if allowed is not None and not allowed[index]:
                continue
            held = self._held(index, start, end) if reserved_start[index] < end else None
            already = taken.get(index) if taken else None
            room_gpu = free_gpu[index]
            if already:
                room_gpu -= already.get(GPU, 0)
            if held:
                room_gpu -= held.get(GPU, 0)
            fits = room_gpu // gpu if gpu else len(names)
            if fits <= 0:
                continue
            node_free = free[index]
            for name, amount in others:
                room = node_free.get(name, 0)
                if already:
                    room -= already.get(name, 0)
                if held:
                    room -= held.get(name, 0)
                room //= amount
                if room < fits:  # min(), without the call: this loop runs for every node tried
                    fits = room
                    if fits <= 0:
                        break
            if fits > 0:
                found.append((index, fits, room_gpu, already is None))
                holds += fits
        if required and holds < len(names):
            return False  # the nodes hold too few: nothing to order
        candidates = []
        for index, fits, room_gpu, fresh in found:
            grouped = (
                [part for lv in inner for part in (-lv.domain_free[lv.node_domain[index]], lv.node_domain[index])]
                if inner
                else ()
            )
            avoided = allowed is not None and allowed[index] == AVOIDED
            candidates.append((fresh, avoided, *grouped, room_gpu, now_free[index] if now_free else 0, index, fits))
        candidates.sort()
        remaining = len(names)
        position = 0
        for *_, index, fits in candidates:
            count = min(fits, remaining)
            if self.domain_rooms:
                count = self._domain_left(index, count, others, taken)
                if not count:
                    continue
            used = taken.setdefault(index, {})
            if gpu:
                used[GPU] = used.get(GPU, 0) + gpu * count
            for name, amount in others:
                used[name] = used.get(name, 0) + amount * count
            for member in names[position : position + count]:
                assignment.append((member, index))
            position += count
            remaining -= count
            if not remaining:
                break
        return remaining == 0 or not required


# The most work one exact search may do (node states looked at); beyond it the search gives up
# without a proof, so the gang is not declared unfit. Small clusters and gangs of a few pod shapes
# (the property tests: up to 6 nodes, 3 shapes, 6 pods) finish far within it.
EXACT_SEARCH_BUDGET = 20_000


class ExactSearch:
    """Backtracking over a gang's required pods, shape by shape, for a placement the greedy fill
    missed. Nodes count only by what they have free of the resources the gang requests, so nodes
    alike are tried once per pod; a state (pods placed, free vectors left) that failed once is not
    tried again; a state is cut when its nodes hold, in all or in slots for one shape's pods, less
    than the pods left need. Candidates go tightest first (fewest free GPUs, then other resources).
    The work is bounded by ``EXACT_SEARCH_BUDGET``: ``complete`` says whether the search finished,
    so that a miss proves no placement exists. ``tags`` (node index -> numbers) sets nodes apart
    that are alike by what they have free, and ``accept`` decides whether a full placement counts:
    a rule over groups of nodes (``Cluster._keeps_domains``) that their tags tell apart."""

    def __init__(
        self,
        shapes: Sequence[Shape],
        rooms: Mapping[int, Mapping[str, int]],
        tags: Mapping[int, tuple[int, ...]] | None = None,
        accept: Callable[[Assignment], bool] | None = None,
    ):
        resources = [GPU, *sorted({name for shape in shapes for name, _ in shape.others})]
        untagged = len(next(iter(tags.values()), ())) if tags else 0  # tags are asked for nothing
        self.members: list[tuple[str, tuple[int, ...]]] = []  # (member name, demand), shape by shape
        self.shapes: list[tuple[tuple[int, ...], int, int]] = []  # (demand, first member, end)
        for shape in shapes:
            others = dict(shape.others)
            demand = tuple(shape.gpu if name == GPU else others.get(name, 0) for name in resources)
            demand += (0,) * untagged
            self.shapes.append((demand, len(self.members), len(self.members) + len(shape.member_names)))
            self.members.extend((name, demand) for name in shape.member_names)
        # what the members from each position on need in all, per resource
        self.need_from = [(0,) * (len(resources) + untagged)]
        for _, demand in reversed(self.members):
            self.need_from.append(tuple(a + b for a, b in zip(self.need_from[-1], demand, strict=True)))
        self.need_from.reverse()
        self.nodes: dict[tuple[int, ...], list[int]] = {}  # free vector -> node indexes
        for index, room in rooms.items():
            vector = tuple(room.get(name, 0) for name in resources) + (tags[index] if tags else ())
            self.nodes.setdefault(vector, []).append(index)
        self.accept = accept
        self.failed: set[tuple] = set()
        self.chosen: list[int] = []
        self.budget = EXACT_SEARCH_BUDGET
        self.complete = True

    def run(self) -> Assignment | None:
        if not self._place(0):
            return None
        return self._assignment()

    def _assignment(self) -> Assignment:
        return [(name, index) for (name, _), index in zip(self.members, self.chosen, strict=True)]

    def _place(self, position: int) -> bool:
        if position == len(self.members):
            return self.accept is None or self.accept(self._assignment())
        nodes = self.nodes
        state = (position, tuple(sorted((vector, len(indexes)) for vector, indexes in nodes.items() if indexes)))
        if state in self.failed:
            return False
        self.budget -= len(state[1])
        if self.budget < 0:
            self.complete = False
            return False
        if self._enough_left(position, state[1]):
            demand = self.members[position][1]
            for vector, _ in state[1]:
                if any(free < amount for free, amount in zip(vector, demand, strict=True)):
                    continue
                after = tuple(free - amount for free, amount in zip(vector, demand, strict=True))
                index = nodes[vector].pop()
                nodes.setdefault(after, []).append(index)
                self.chosen.append(index)
                if self._place(position + 1):
                    return True
                if not self.complete:
                    return False
                self.chosen.pop()
                nodes[after].pop()
                nodes[vector].append(index)
        self.failed.add(state)
        return False

    def _enough_left(self, position: int, vectors: Sequence[tuple[tuple[int, ...], int]]) -> bool:
        """Necessary for placing the members from ``position`` on: the free vectors hold what they
        need in all, and slots for the pods left of every shape."""
        for resource, need in enumerate(self.need_from[position]):
            if need and sum(vector[resource] * count for vector, count in vectors) < need:
                return False
        for demand, first, end in self.shapes:
            left = end - max(first, position)
            if left <= 0:
                continue
            slots = 0
            for vector, count in vectors:
                fitting = min((free // need for free, need in zip(vector, demand, strict=True) if need), default=left)
                slots += count * max(fitting, 0)
                if slots >= left:
                    break
            if slots < left:
                return False
        return True


class FutureWalk:
    """The cluster's free capacity as expected releases are applied in time order, to find the
    earliest time a gang fits. Until the gang's pods could fit by GPU count, only the free GPUs per
    node are followed; the full view (``Cluster.future``) is built, with every release so far, when
    a placement is first worth trying, and updated release by release from then on."""

    __slots__ = ("cluster", "free_gpu", "gpu_histogram", "released", "total_free_gpu", "view")

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.view: Cluster | None = None
        self.released: dict[int, dict[str, int]] = {}  # node index -> resources released so far
        self.free_gpu: dict[int, int] = {}  # node index -> free GPUs, for nodes with releases
        self.gpu_histogram = dict(cluster.gpu_histogram)
        self.total_free_gpu = cluster.total_free_gpu

    def release(self, node_index: int, requests: Resources) -> None:
        if self.view is not None:
            self.view.adjust(node_index, requests, +1)
            return
        add_resources(self.released.setdefault(node_index, {}), requests)
        gpu = requests.get(GPU, 0)
        if gpu:
            histogram = self.gpu_histogram
            old = self.free_gpu.get(node_index)
            if old is None:
                old = self.cluster.free_gpu[node_index]
            histogram[old] -= 1
            histogram[old + gpu] = histogram.get(old + gpu, 0) + 1
            self.free_gpu[node_index] = old + gpu
            self.total_free_gpu += gpu

    def place(
        self,
        profile: GangProfile,
        allowed: Acceptance | None,
        window: tuple[float, float],
        finest_level: int,
        widest_level: int,
    ) -> Assignment | None:
        """``Cluster.place`` in the view with the releases so far."""
        if self.view is None and not gpu_counts_suffice(profile, self.total_free_gpu, self.gpu_histogram):
            return None
        return self.full_view().place(profile, allowed, window, finest_level, widest_level)

    def holds(
        self, profile: GangProfile, assignment: Assignment, allowed: Acceptance | None, window: tuple[float, float]
    ) -> bool:
        """``Cluster.holds`` in the view with the releases so far."""
        return self.full_view().holds(profile, assignment, allowed, window)

    def full_view(self) -> Cluster:
        if self.view is None:
            self.view = self.cluster.future()
            for node_index, requests in self.released.items():
                self.view.adjust(node_index, requests, +1)
        return self.view
