"""Explain: why a waiting gang did not start, for the gangs tried and those the pass never tried.

A capacity reason names the first shortfall that holds: too few free GPUs in the gang's widest
domain, in the cluster or on the nodes it may use (with the node rules that keep it off others);
a reservation it cannot run past; a resource its pods find too little of, in all or node by node;
fragmentation; else that the pods' requests are not free together. The gangs left untried by a
pass that stopped early get the reason they would have got at their turn, worked out on the first
read of ``Decisions.reasons`` (``explain_untried``), or that they wait behind a strict order's head.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterable
from itertools import compress

from railforge.scheduler import reasons
from railforge.scheduler.cycle import CycleState
from railforge.scheduler.model import GPU, Gang, Reason
from railforge.scheduler.placement import Acceptance, Cluster, GangProfile, is_spread_key, node_loads
from railforge.scheduler.stages import admit


def reaches(amounts: Iterable[int], target: int) -> bool:
    """Whether the amounts add up to ``target``; stops reading them as soon as they do."""
    total = 0
    for amount in amounts:
        total += amount
        if total >= target:
            return True
    return target <= 0


def explain_untried(state: CycleState, waiting: list[Gang], head_blocker: str | None) -> None:
    """The reasons of the gangs the pass did not try."""
    strict = not state.config.skip_ahead
    tried = state.tried
    for gang in waiting:
        if gang.name not in tried:
            if head_blocker is not None and strict and not admit.never_starts(state, gang, state.memo.profile(gang)):
                state.decisions.reasons[gang.name] = reasons.strict_order(head_blocker)
            else:
                frozen_reason(state, gang)


def frozen_reason(state: CycleState, gang: Gang) -> bool:
    """Record the reason of a gang left untried by a settled pass, what try_start would record;
    True when the gang is blocked on capacity (not by its queue's limit)."""
    profile = state.memo.profile(gang)
    limit_reason = admit.limit_reason(state, gang.queue, profile)
    if limit_reason is not None:
        state.decisions.reasons[gang.name] = limit_reason
        return False
    key = profile.failure_key
    runtime = state.runtime(gang)
    cached = state.failure_cache.get(key)
    if cached is None or runtime < cached[0]:
        if not admit.never_starts(state, gang, profile):
            finest, widest = state.levels_for(gang, profile)
            allowed = state.cluster.allowed_nodes(gang, profile)
            state.failure_cache[key] = (runtime, capacity_reason(state, gang, profile, allowed, finest, widest))
        cached = state.failure_cache[key]
    state.decisions.reasons[gang.name] = cached[1]
    return key not in state.unfit_keys


def capacity_reason(
    state: CycleState, gang: Gang, profile: GangProfile, allowed: Acceptance | None, finest: int, widest: int
) -> Reason:
    """Why the gang cannot start now (``shortfall``), and which of the nodes it may use are in maintenance."""
    return with_maintenance(state, shortfall(state, gang, profile, allowed, finest, widest), allowed)


def unreserved(state: CycleState, profile: GangProfile, allowed: Acceptance | None) -> Reason:
    """Why no start can be promised to a blocked gang: a maintenance window ahead on nodes it may use leaves its
    max runtime no room, else gangs without a max runtime hold what it needs."""
    need, free = profile.required_gpu, state.cluster.total_free_gpu
    index = state.cluster.index
    for start, nodes in state.maintenance:
        usable = [name for name in nodes if allowed is None or allowed[index[name]]]
        if start > state.now and usable:
            return reasons.no_start_before_maintenance(need, free, start, usable)
    return with_maintenance(state, state.reason(reasons.no_start_time, need, free), allowed)


def with_maintenance(state: CycleState, reason: Reason, allowed: Acceptance | None) -> Reason:
    """``reason`` with the nodes the gang may use that are in maintenance now, if any."""
    started = [(start, nodes) for start, nodes in state.maintenance if start <= state.now]
    index = state.cluster.index
    closed = [name for _, nodes in started for name in nodes if allowed is None or allowed[index[name]]]
    if not closed:
        return reason
    return reasons.in_maintenance(reason, min(start for start, _ in started), closed)


def shortfall(
    state: CycleState, gang: Gang, profile: GangProfile, allowed: Acceptance | None, finest: int, widest: int
) -> Reason:
    """Why the gang cannot start now, the first that holds of: too few free GPUs in its widest
    domain, in the cluster, in one domain of its ``Together`` or on the nodes it may use; a
    reservation holds what it would fit in; a resource its pods find too little of, in all or
    node by node; the pods' requests are not free together on the same nodes."""
    cluster = state.cluster
    if profile.pins:
        short = pinned_shortfall(state, profile, allowed)
        if short is not None:
            return short
    need = profile.required_gpu
    if widest >= 0:
        level = cluster.levels[widest]
        if allowed is None:
            best = level.best_free()
        else:
            free_gpu = free_view(state, profile, allowed).free_gpu
            best = max((sum(free_gpu[index] for index in members) for members in level.members.values()), default=0)
        if need > best:
            return state.reason(reasons.within_domain, need, state.level_names[widest], best)
    if need > cluster.total_free_gpu:
        return state.reason(reasons.cluster_short, GPU, need, cluster.total_free_gpu)
    view = free_view(state, profile, allowed)
    if gang.together is not None:
        domains = cluster.label_domains(gang.together.topology_key).values()
        best = max((sum(view.free_gpu[index] for index in members) for members in domains), default=0)
        if need > best:
            return state.reason(reasons.within_domain, need, f"{gang.together.topology_key} domain", best)
    if allowed is not None and need > view.total_gpu:
        # the words for the node rules follow the filter, but for the order of affinity terms
        key = (need, view.total_gpu, profile.filter_key, gang.affinity)
        made = state.made_reasons.get(key)
        if made is None:
            made = state.made_reasons[key] = reasons.no_matching_nodes(
                need, view.total_gpu, *admit.excluded(state, gang, profile)
            )
        return made
    holds = future_holds(state)
    if holds and cluster.fits(profile, allowed, (state.now, state.now), finest, widest):
        return blocking_hold(state, holds, profile, allowed, finest, widest)
    return requests_reason(profile, view, state.reason)


def pinned_shortfall(state: CycleState, profile: GangProfile, allowed: Acceptance | None) -> Reason | None:
    """The first resource a pinned node lacks now for the required members pinned there (nodes
    in name order); None when each has what they need (a reservation then keeps the gang out)."""
    cluster = state.cluster
    assignment = cluster.pinned_nodes(profile, allowed, -1)[0]
    loads = node_loads(profile, assignment[: len(profile.required_pins)])
    rooms = cluster.rooms(loads, allowed, (state.now, state.now))
    for position in sorted(loads):
        for name, need in sorted(loads[position].items()):
            free = rooms[position].get(name, 0)
            if need > free:
                return reasons.pinned_short(cluster.nodes[position].name, name, need, free)
    return None


Hold = tuple[float, Callable[[], Reason]]  # when it starts, and the words of a gang that cannot run past it


def future_holds(state: CycleState) -> list[Hold]:
    """What holds capacity from a time on, soonest first: the gangs' reservations and the maintenance
    windows still to come."""
    holds: list[Hold] = [
        (r.start, functools.partial(reasons.behind_reservation, r.gang_name, r.start, state.now))
        for r in state.decisions.reservations
    ]
    holds += [
        (start, functools.partial(reasons.behind_maintenance, start, nodes))
        for start, nodes in state.maintenance
        if start > state.now
    ]
    return sorted(holds, key=operator.itemgetter(0))


def blocking_hold(
    state: CycleState, holds: list[Hold], profile: GangProfile, allowed: Acceptance | None, finest: int, widest: int
) -> Reason:
    """Why the gang, which fits free capacity now, waits: the first hold, soonest first, whose start
    it cannot run past (it fits until that start, and not once the hold begins). The gang does not
    fit for its whole run, so when none before it blocks, the latest does: it is not tried."""
    *earlier, latest = holds
    for start, words in earlier:
        until = math.nextafter(start, math.inf)  # a window that overlaps the hold
        if not state.cluster.fits(profile, allowed, (state.now, until), finest, widest):
            return words()
    return latest[1]()


class FreeView:
    """What the nodes a gang may use have free, as the reasons read it; each part is worked out
    on first use, from the cluster's nodes by free GPUs where it can (a full cluster has few
    nodes with GPUs free). ``allowed``: the gang's node filter (None: every node)."""

    def __init__(self, cluster: Cluster, allowed: Acceptance | None):
        self.cluster = cluster
        self.allowed = allowed
        self._gpu_slots: dict[int, int] = {}

    @functools.cached_property
    def total_gpu(self) -> int:
        """Free GPUs on the nodes the gang may use."""
        cluster, allowed = self.cluster, self.allowed
        if allowed is None:
            return cluster.total_free_gpu
        if len(cluster.free_gpu) - cluster.gpu_histogram.get(0, 0) < len(cluster.free_gpu) // 32:
            # few nodes have GPUs free (a full cluster): count those alone
            return sum(gpus * self._count(nodes) for gpus, nodes in cluster.gpu_nodes.items() if gpus)
        return cluster.free_gpu_on(allowed)

    def _count(self, nodes: Iterable[int]) -> int:
        """How many of the nodes the gang may use."""
        allowed = self.allowed
        return sum(1 for index in nodes if allowed is None or allowed[index])

    @functools.cached_property
    def free_gpu(self) -> list[int]:
        """Free GPUs of every node, 0 where the gang may not go."""
        if self.allowed is None:
            return self.cluster.free_gpu
        return [gpus if ok else 0 for gpus, ok in zip(self.cluster.free_gpu, self.allowed, strict=True)]

    def free(self) -> Iterable[dict[str, int]]:
        """Free resources of the nodes the gang may use, read afresh on each call (a reason
        often needs only the first few)."""
        if self.allowed is None:
            return self.cluster.free
        return compress(self.cluster.free, self.allowed)

    def gpu_slots(self, gpu: int) -> int:
        """How many pods of ``gpu`` GPUs the nodes it may use hold by free GPUs, node by node."""
        slots = self._gpu_slots.get(gpu)
        if slots is None:
            if self.allowed is None:
                slots = sum(nodes * (gpus // gpu) for gpus, nodes in self.cluster.gpu_histogram.items())
            else:
                nodes_by_gpus = self.cluster.gpu_nodes.items()
                slots = sum(
                    (gpus // gpu) * self._count(nodes) for gpus, nodes in nodes_by_gpus if gpus >= gpu or gpus < 0
                )
            self._gpu_slots[gpu] = slots
        return slots

    @functools.cached_property
    def most_gpu(self) -> int:
        """The most free GPUs of one node in ``free_gpu`` (where a node it may not use has 0)."""
        nodes_by_gpus = self.cluster.gpu_nodes
        allowed = self.allowed
        most = next(
            (
                gpus
                for gpus in sorted(nodes_by_gpus, reverse=True)
                if allowed is None or any(allowed[index] for index in nodes_by_gpus[gpus])
            ),
            0,
        )
        return max(most, 0) if allowed is not None and allowed.rejects else most


def free_view(state: CycleState, profile: GangProfile, allowed: Acceptance | None) -> FreeView:
    """The gang's ``FreeView``, kept per node filter while the cluster stays the same."""
    cached = state.allowed_views.get(profile.filter_key)
    if cached is None or cached[0] != state.version:
        cached = state.allowed_views[profile.filter_key] = (state.version, FreeView(state.cluster, allowed))
    return cached[1]


def _made(make: Callable[..., Reason], *args: object) -> Reason:
    return make(*args)


def requests_reason(profile: GangProfile, view: FreeView, made: Callable[..., Reason] = _made) -> Reason:
    """The gang's GPUs are free in number but it does not fit: name the request it finds too
    little of (in all, then node by node for one shape of pod), else fragmentation. ``made``
    makes the reason from its wording function and arguments (``CycleState.reason``)."""
    needed: dict[str, int] = {}
    for shape in profile.required_shapes:
        for name, amount in shape.others:
            if not is_spread_key(name):
                needed[name] = needed.get(name, 0) + amount * len(shape.member_names)
    for name, amount in sorted(needed.items()):
        if not reaches((node_free.get(name, 0) for node_free in view.free()), amount):
            return reasons.cluster_short(name, amount, sum(node_free.get(name, 0) for node_free in view.free()))
    for shape in profile.required_shapes:
        count = len(shape.member_names)
        if shape.gpu and view.gpu_slots(shape.gpu) < count:
            return made(reasons.fragmented, profile.required_gpu, shape.gpu, view.most_gpu)
        for name, amount in shape.others:
            if is_spread_key(name):
                continue
            if not reaches((node_free.get(name, 0) // amount for node_free in view.free()), count):
                room = sum(node_free.get(name, 0) // amount for node_free in view.free())
                most = max((node_free.get(name, 0) for node_free in view.free()), default=0)
                return reasons.pods_short(count, name, amount, room, most)
    for _, members, spread, _ in profile.spreads:
        if spread.required:
            return reasons.spread_short(len(members), spread, None)
    largest = profile.required_shapes[0].gpu if profile.required_shapes else 0
    return made(reasons.requests_apart, profile.required_gpu, largest)
