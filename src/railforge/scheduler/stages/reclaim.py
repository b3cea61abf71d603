"""Reclaim and preempt: evict running gangs so that the head of the line starts now.

Reclaim takes back borrowed capacity for a gang whose queue is within its quota: whole borrowed
gangs of other queues, lowest priority and least work lost first, only while the victim's queue
stays at least as well served as the claimer's, and only while the work lost stays within what
the claim saves. Preemption (``preempt_backfill``) evicts the gangs of the claimer's own queue that
started past its reservation and would have ended by its reserved start. Either evicts nothing
when the gang would not fit even then, and spares every victim the gang can do without.

Which victims go is the cheapest of several trials (``evict_for``): the victims of single domains of
the gang's topology level and of the finest level, and all victims in two orders.
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
    domain_level: int  # the level within one domain of which the gang asks to run; -1 for none


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
        after = left.get(victim_queue, usage.gpus(victim_queue)) - state.gpus(r)
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
    """Place the gang by evicting those of ``victims`` that the trials below find: the set whose
    highest priority is lowest, then whose loss costs the least work (on a tie, a trial that keeps
    the gang within its domain). When it would not fit even with all of them gone, evict nothing
    and say why (a ``reasons.DECLINED`` key): ``spared``, why the caller left some candidates out,
    if it did; else "room"."""
    declined = spared or ("room" if victims else None)
    if state.cluster.total_free_gpu + sum(map(state.gpus, victims)) < claim.profile.required_gpu:
        return None, declined  # even evicting every victim would not free enough GPUs
    # Each trial's victims are put back. Taken: the trial whose highest victim priority is lowest, then
    # the one losing the least work, then the first (a domain's).
    trials: list[tuple[tuple[float, float], Assignment, list[RunningGang]]] = []

    def attempt(choice: list[RunningGang], widest: int) -> None:
        evicted = evict_needed(state, claim, choice, widest)
        if evicted is not None:
            needed = evicted[1]
            for victim in needed:
                release(state, victim, -1)
            cost = (
                max((victim.gang.priority for victim in needed), default=-math.inf),
                sum(map(state.lost_work, needed)),
            )
            trials.append((cost, *evicted))

    # First the victims of single domains, placed within the claim's domain: at its level (it asks
    # to run within one) and at the finest level (one node's or NVLink domain's victims can free
    # the room that many small ones elsewhere would). Then all victims, in two orders: cheapest
    # first, and the least work lost per GPU freed (the youngest) first, within each priority.
    in_domain = max(claim.widest, claim.domain_level)
    for level in sorted({claim.domain_level, claim.finest}):
        for choice in domain_choices(state, claim, victims, level):
            attempt(choice, in_domain)
    attempt(victims, claim.widest)
    by_age = sorted(victims, key=lambda running: (running.gang.priority, -running.start_time))
    if any(one is not other for one, other in zip(by_age, victims, strict=True)):
        attempt(by_age, claim.widest)
    best = min(trials, key=lambda trial: trial[0], default=None)
    if best is None:
        return None, declined
    _, assignment, needed = best
    for victim in needed:
        release(state, victim, +1)
        state.evicted.add(victim.gang.name)
        state.usage.add(victim.gang.queue, state.memo.placed_by_node(victim)[2], -1)
        state.decisions.evictions.append(Evict(victim.gang.name, reason, cause))
    state.failure_cache.clear()  # capacity grew: every class with untried gangs may fit again
    state.open_classes = {key for key in state.classes if state.untried_runtime(key) is not None}
    state.version += 1
    return assignment, None


DOMAIN_CHOICES = 4  # the most domains whose victims a claim tries before taking victims wherever they run


def domain_choices(state: CycleState, claim: Claim, victims: list[RunningGang], depth: int) -> list[list[RunningGang]]:
    """For each domain of the level ``depth``, the victims that run there, in victim order; first
    the domains where the fewest of them, taken in that order, lose the least work to free as many
    GPUs there as the claim needs (as many as one pod needs at the finest level, whose domains
    may be single nodes); at most ``DOMAIN_CHOICES`` domains. None for the whole cluster (-1)."""
    if depth < 0 or not claim.profile.required_gpu:
        return []
    cluster = state.cluster
    level = cluster.levels[depth]
    there: dict[tuple, list[tuple[RunningGang, int]]] = {}  # domain -> (victim, GPUs it frees there)
    for victim in victims:
        freed: dict[tuple, int] = {}
        for node, requests in state.memo.placed_by_node(victim)[1]:
            index = cluster.index.get(node)
            if index is not None:
                domain = level.node_domain[index]
                freed[domain] = freed.get(domain, 0) + requests.get(GPU, 0)
        for domain, gpus in freed.items():
            there.setdefault(domain, []).append((victim, gpus))
    need = claim.profile.required_gpu
    if depth == claim.finest > claim.domain_level:
        need = claim.profile.required_shapes[0].gpu if claim.profile.required_shapes else need
    ranked = []
    for domain, candidates in there.items():
        free, lost = level.domain_free[domain], 0.0
        for victim, gpus in candidates:
            if free >= need:
                break
            free += gpus
            lost += state.lost_work(victim)
        if free >= need:
            ranked.append((lost, domain, [victim for victim, _ in candidates]))
    ranked.sort(key=lambda choice: choice[:2])
    return [candidates for _, _, candidates in ranked[:DOMAIN_CHOICES]]


def evict_needed(
    state: CycleState, claim: Claim, victims: list[RunningGang], widest: int
) -> tuple[Assignment, list[RunningGang]] | None:
    """Release victims in order until the gang fits (within one domain of level ``widest`` when not
    -1), then take back every one it can do without,
    the last in victim order first: (the assignment, the victims still needed, in victim order)
    with those left released, or None with the cluster as it was."""
    cluster = state.cluster
    need = claim.profile.required_gpu

    def place() -> Assignment | None:
        return cluster.place(claim.profile, claim.allowed, (state.now, claim.end), claim.finest, widest)

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
        return None
    needed: list[RunningGang] = []
    for victim in reversed(released):
        release(state, victim, -1)
        without = place()
        if without is None:
            release(state, victim, +1)
            needed.append(victim)
        else:
            assignment = without
    return assignment, needed[::-1]


def release(state: CycleState, running: RunningGang, sign: int) -> None:
    cluster = state.cluster
    for node, requests in state.memo.placed_by_node(running)[1]:
        index = cluster.index.get(node)
        if index is not None:
            cluster.adjust(index, requests, sign)
