"""Allocate: try one gang at its turn, start it all-or-nothing or record why not.

The cheap checks come first (the queue's limits, a class already known never to fit, a class that
already failed for a run window no longer than this gang's), then placement: a reservation's
holder starts on its reserved nodes when they are free for it, others are placed best-fit
(``placement.Cluster.place``). A gang that does not fit may, at the head of the line, reclaim
borrowed capacity (``reclaim``) or preempt the gangs that backfilled past it; a blocked gang among
the first ``reservation_depth`` gets a reservation (``reserve``). Binding charges the queue and
takes the capacity from the view.
"""

from __future__ import annotations

import math

from railforge.scheduler import reasons
from railforge.scheduler.cycle import CycleState
from railforge.scheduler.model import Bind, Gang, ReasonCode, add_resources
from railforge.scheduler.placement import Acceptance, Assignment, GangProfile
from railforge.scheduler.stages import admit, explain, reclaim, reserve
from railforge.scheduler.stages.reclaim import Claim
from railforge.scheduler.stages.reserve import Start


def try_start(state: CycleState, gang: Gang, profile: GangProfile) -> bool:
    """Start the gang (``profile``: its profile), or record why it cannot; False when it is blocked
    on capacity.

    Cheap checks come first: the queue limit only for queues that have one on their path, then
    the per-shape failure cache (placement cannot succeed for a gang whose shape already failed
    with a run window no longer than this one, since capacity only shrinks between reclaims).
    Only the gangs at the head of the line (the first blocked ones: those that get the
    reservations, or the first one without backfill) may reclaim, when within quota; only the
    first may preempt what backfilled past it.
    """
    decisions = state.decisions
    queue = gang.queue
    limit_reason = admit.limit_reason(state, queue, profile)
    if limit_reason is not None:
        decisions.reasons[gang.name] = limit_reason
        return True
    key = profile.failure_key
    if key in state.unfit_keys or admit.unknown_level(state, gang, key):
        decisions.reasons[gang.name] = state.failure_cache[key][1]
        return True
    cluster = state.cluster
    runtime = state.runtime(gang)
    end = state.now + runtime
    cached = state.failure_cache.get(key)
    fresh = cached is None or runtime < cached[0]
    head = state.blocked < max(state.depth, 1)
    allowed: Acceptance | None = None
    finest = widest = -1
    promised = reserve.promised_assignment(state, gang.name, profile)
    if fresh or head or promised:  # placement, the reservation and reclaim need the node filter and levels
        allowed = cluster.allowed_nodes(gang, profile)
        finest, widest = state.levels_for(gang, profile)
    assignment = None
    if promised and cluster.holds(profile, promised, allowed, (state.now, end)):
        assignment = promised
    elif fresh:
        assignment = cluster.place(profile, allowed, (state.now, end), finest, widest)
    if assignment is None and fresh and admit.unfit(state, gang, profile, allowed, finest, widest):
        decisions.reasons[gang.name] = state.failure_cache[key][1]
        return True
    expected: Start | None = None

    def claim() -> Claim:
        return Claim(profile, allowed, end, finest, widest, state.domain_level(gang))

    declined: list[tuple[str, str]] = []  # (action, why) of each eviction the gang declined
    reclaims = assignment is None and head and state.can_reclaim
    if reclaims and not borrows(state, queue, profile):
        expected = reserve.earliest_start(state, gang, profile, allowed, runtime, finest, widest)
        wait = math.inf if expected is None else expected[0] - state.now
        assignment, why = reclaim.reclaim(state, gang, claim(), wait)
        if why is not None:
            declined.append(("reclaiming", why))
    if assignment is None and state.blocked == 0 and state.may_preempt(gang):
        if expected is None:
            expected = reserve.earliest_start(state, gang, profile, allowed, runtime, finest, widest)
        start = math.inf if expected is None else expected[0]
        if start > state.now:
            assignment, why = reclaim.preempt(state, gang, claim(), start)
            if why is not None:
                declined.append(("preempting", why))
    if assignment is not None:
        bind(state, gang, profile, assignment, end)
        return True
    if fresh:
        # Probe the class's shortest untried gang too: when even its shorter run window fails,
        # every gang of the class fails, and the pass may stop before trying them.
        failed = runtime
        shortest = state.untried_runtime(key)
        if (
            shortest is not None
            and shortest < runtime
            and not cluster.fits(profile, allowed, (state.now, state.now + shortest), finest, widest)
        ):
            failed = shortest
        cached = (failed, explain.capacity_reason(state, gang, profile, allowed, finest, widest))
        state.failure_cache[key] = cached
    decisions.reasons[gang.name] = state.failure_cache[key][1]
    state.blocked += 1
    if state.reservations_made < state.depth:
        state.reservations_made += 1
        if expected is None:
            expected = reserve.earliest_start(state, gang, profile, allowed, runtime, finest, widest)
        if expected is not None:
            reserve.reserve(state, gang, profile, runtime, expected)
        elif decisions.reasons.code(gang.name) not in (ReasonCode.MAINTENANCE, ReasonCode.CAPACITY_SPREAD):
            # else that says more: maintenance, or the pods its spread counts, which no end frees
            decisions.reasons[gang.name] = explain.unreserved(state, profile, allowed)
    for action, why in declined:
        decisions.reasons[gang.name] = reasons.declined(decisions.reasons[gang.name], action, why)
    return False


def borrows(state: CycleState, queue: str, profile: GangProfile) -> bool:
    """``usage.borrows`` for the gang's admission charge, cached per queue and charge while the
    cluster version (which every change of usage bumps) stays the same."""
    key = (queue, tuple(sorted(profile.admission.items())))
    cached = state.borrow_cache.get(key)
    if cached is not None and cached[0] == state.version:
        return cached[1]
    result = state.usage.borrows(queue, profile.admission)
    state.borrow_cache[key] = (state.version, result)
    return result


def bind(state: CycleState, gang: Gang, profile: GangProfile, assignment: Assignment, end: float) -> None:
    """Start the gang as placed. An optional member (beyond ``min_member``) that would take the
    queue past a limit is left out; the gang borrows when what it holds exceeds a quota."""
    cluster = state.cluster
    queue = gang.queue
    placement = {}
    charge: dict[str, int] = {}
    member_requests = profile.member_requests()
    for position, (member, index) in enumerate(assignment):
        requests = member_requests[member]
        if (
            position >= gang.required_members
            and state.queue_limited(queue)
            and state.usage.over_limit(queue, add_resources(dict(charge), requests)) is not None
        ):
            continue
        cluster.adjust(index, requests, -1)
        add_resources(charge, requests)
        placement[member] = cluster.nodes[index].name
        state.bound_releases.append((end, index, requests))
    borrowed = state.usage.borrows(queue, charge)
    state.usage.add(queue, charge)
    state.version += 1
    passed = state.first_reservation.gang_name if state.first_reservation is not None else None
    started = Bind(gang.name, placement, borrowed, passed)
    state.decisions.binds.append(started)
    state.bound_ends.append((started, end))
