"""Reclaim and preempt: evict running gangs so that the head of the line starts now.

Reclaim takes back borrowed capacity for a gang whose queue is within its quota: whole borrowed
gangs of other queues, lowest priority and least work lost first, only while the victim's queue
stays at least as well served as the claimer's, and only while the work lost stays within what
the claim saves. Preemption (``preempt_backfill``) evicts the gangs of the claimer's own queue that
started past its reservation and would have ended by its reserved start. Either evicts nothing
when the gang would not fit even then, and spares every victim the gang can do without.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from railforge.scheduler.cycle import CycleState
from railforge.scheduler.model import GPU, Evict, EvictCause, Gang, RunningGang
from railforge.scheduler.placement import Acceptance, Assignment, GangProfile


class Claim(NamedTuple):
    """What a gang that evicts (reclaim, preemption) asks room for: its placement request as
    ``Cluster.place`` takes it, running from now to ``end``."""

    profile: GangProfile
    allowed: Acceptance | None
    end: float
    finest: int
    widest: int


def quota_ratio(gpus: float, quota: float) -> float:
    """GPUs held per GPU of quota; infinite for a queue without a GPU quota (it is owed nothing)."""
    return gpus / quota if quota > 0 else math.inf


def reclaim(state: CycleState, gang: Gang, claim: Claim, wait: float) -> tuple[Assignment | None, str | None]:
    """Evict whole borrowed gangs of other queues (lowest priority, least work lost first) until
    the gang fits; evict nothing when it would not fit even then. Returns the assignment, or
    None and why the claim was declined (a ``reasons.DECLINED`` key; None when there
    was nothing to reclaim).

    A victim is taken only while its queue stays at least as well served as the claiming queue
    will be (GPUs held / GPU quota, after both changes; a queue without a GPU quota is always
    over it). Without that rule an eviction can push the victim's queue below its own quota, so
    its gang reclaims in turn: a chain of evictions in which every victim loses its progress.
    The victims' lost work (their GPUs x run time) is bounded by what the claim saves, the
    claimer's GPUs x ``wait`` (until it would start otherwise), times ``reclaim_cost_limit``.
    """
    own_path = set(state.tree.path(gang.queue))
    usage = state.usage
    budget = state.eviction_budget(claim.profile, wait)
    claimed = quota_ratio(usage.gpus(gang.queue) + claim.profile.gpu, state.tree.quota(gang.queue).get(GPU, 0))
    over_quota: dict[str, bool] = {}
    left: dict[str, int] = {}  # victim queue -> GPUs it would hold after the victims so far
    victims = []
    too_costly = better_served = False  # some borrower was spared for the cost bound / ratio rule
    for r in state.reclaimable:
        victim_queue = r.gang.queue
        if r.gang.name in state.evicted or victim_queue in own_path:
            continue
        over = over_quota.get(victim_queue)
        if over is None:
            over = over_quota[victim_queue] = usage.over_quota(victim_queue)
        if not over:
            continue
        after = left.get(victim_queue, usage.gpus(victim_queue)) - state.memo.placed_by_node(r)[2].get(GPU, 0)
        lost = state.lost_work(r)
        if lost > budget:
            too_costly = True
        elif quota_ratio(after, state.tree.quota(victim_queue).get(GPU, 0)) < claimed:
            better_served = True
        else:
            left[victim_queue] = after
            budget -= lost
            victims.append(r)
    reason = f"reclaimed by queue {gang.queue} (within its quota) for gang {gang.name}"
    spared = "cost" if too_costly else "served" if better_served else None
    return evict_for(state, claim, victims, reason, "reclaim", spared)


def preempt(state: CycleState, gang: Gang, claim: Claim, start: float) -> tuple[Assignment | None, str | None]:
    """Evict gangs of the gang's own queue that started past its reservation (``preempt_backfill``)
    when it could then start now instead of at ``start``; victims as for reclaim (lowest priority,
    least work lost first, past their minimum runtime), their lost work bounded in the same way.
    Returns what ``reclaim`` returns.

    Only gangs whose estimated end is no later than ``start`` are taken: the gangs that, as their
    estimates promised, would be gone by then. A gang that backfilled onto other nodes for a
    longer run holds nothing the reservation was promised."""
    budget = state.eviction_budget(claim.profile, start - state.now)
    candidates = sorted(
        (
            running
            for running in state.running_index.backfilled.get(gang.name, {}).values()
            if running.gang.queue == gang.queue
            and running.expected_end <= start
            and running.gang.name not in state.evicted
            and state.may_reclaim(running)
        ),
        key=state.victim_order,
    )
    victims = []
    too_costly = False
    for running in candidates:
        lost = state.lost_work(running)
        if lost <= budget:
            budget -= lost
            victims.append(running)
        else:
            too_costly = True
    reason = f"preempted for gang {gang.name}, whose reservation it started past: that gang can start now"
    return evict_for(state, claim, victims, reason, "preempt", "cost" if too_costly else None)


def evict_for(
    state: CycleState, claim: Claim, victims: list[RunningGang], reason: str, cause: EvictCause, spared: str | None
) -> tuple[Assignment | None, str | None]:
    """Place the gang by evicting the fewest of ``victims`` (taken in their order). When it
    would not fit even with all of them gone, evict nothing and say why (a ``reasons.DECLINED``
    key): ``spared``, why the caller left some candidates out, if it did; else "room"."""
    cluster = state.cluster
    need = claim.profile.required_gpu
    declined = spared or ("room" if victims else None)

    def place() -> Assignment | None:
        return cluster.place(claim.profile, claim.allowed, (state.now, claim.end), claim.finest, claim.widest)

    if cluster.total_free_gpu + sum(state.memo.placed_by_node(r)[2].get(GPU, 0) for r in victims) < need:
        return None, declined  # even evicting every victim would not free enough GPUs
    released: list[RunningGang] = []
    assignment = None
    for victim in victims:
        release(state, victim, +1)
        released.append(victim)
        if cluster.total_free_gpu >= need:
            assignment = place()
            if assignment is not None:
                break
    if assignment is None:
        for victim in released:
            release(state, victim, -1)
        return None, declined
    # Victims were released in victim order, wherever they ran: spare every one the gang can
    # do without, trying the ones that have run longest first.
    needed: list[RunningGang] = []
    for victim in reversed(released):
        release(state, victim, -1)
        without = place()
        if without is None:
            release(state, victim, +1)
            needed.append(victim)
        else:
            assignment = without
    for victim in reversed(needed):
        state.evicted.add(victim.gang.name)
        state.usage.add(victim.gang.queue, state.memo.placed_by_node(victim)[2], -1)
        state.decisions.evictions.append(Evict(victim.gang.name, reason, cause))
    state.failure_cache.clear()  # capacity grew: every class with untried gangs may fit again
    state.open_classes = {key for key in state.classes if state.untried_runtime(key) is not None}
    state.version += 1
    return assignment, None


def release(state: CycleState, running: RunningGang, sign: int) -> None:
    cluster = state.cluster
    for node, requests in state.memo.placed_by_node(running)[1]:
        index = cluster.index.get(node)
        if index is not None:
            cluster.adjust(index, requests, sign)
