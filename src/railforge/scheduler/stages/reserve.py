"""Reserve: a blocked gang's earliest start, and the reservation that holds it.

The earliest start is found by replaying, soonest first, the ends of the running gangs, of the
gangs bound in this cycle and of earlier reservations on a copy of the free-capacity view
(``placement.FutureWalk``) until the gang fits. A gang reserved in the previous decisions keeps
that start and those nodes while they are free for it then, unless it fits earlier. The
reservation holds only what the gang needs on each node during its run window; the rest stays
open to backfill. Its reason names the nodes (and their domain) and the gangs it waits for.
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
from collections.abc import Iterator

from railforge.scheduler import reasons
from railforge.scheduler.cycle import CycleState
from railforge.scheduler.model import Gang, Reservation, Resources
from railforge.scheduler.placement import Acceptance, Assignment, FutureWalk, GangProfile, node_loads

_TIME = operator.itemgetter(0)
Start = tuple[float, Assignment]  # a reservation's time and where its members go then


def releases(state: CycleState) -> Iterator[tuple[float, int, Resources | None]]:
    """(time, node index, requests) of everything running or bound ending then, and (time, -1,
    None) for every reservation's end, soonest first; produced lazily, so finding an early start
    does not pay for ordering every running gang."""
    index = state.cluster.index
    evicted = state.evicted

    def running() -> Iterator[tuple[float, int, Resources]]:
        for gang in state.running_index.by_end:
            if evicted and gang.gang.name in evicted:
                continue
            for node, requests in state.memo.placed_by_node(gang)[1]:
                node_index = index.get(node)
                if node_index is not None:
                    yield gang.expected_end, node_index, requests

    return heapq.merge(
        running(),
        sorted(state.bound_releases, key=_TIME),
        ((end, -1, None) for end in sorted(state.cluster.reservation_ends())),
        key=_TIME,
    )


def promised_assignment(state: CycleState, gang_name: str, profile: GangProfile) -> Assignment | None:
    """Where the gang's reservation in the previous decisions (``Snapshot.reservations``) put
    its members; None without one, or when one of its nodes is gone or its members changed."""
    promise = state.promised.get(gang_name)
    if promise is None or not promise.placement:
        return None
    index = state.cluster.index
    members = profile.member_requests()
    if any(node not in index or member not in members for member, node in promise.placement):
        return None
    placed = {member for member, _ in promise.placement}
    if any(member not in placed for shape in profile.required_shapes for member in shape.member_names):
        return None
    return [(member, index[node]) for member, node in promise.placement]


def earliest_start(
    state: CycleState,
    gang: Gang,
    profile: GangProfile,
    allowed: Acceptance | None,
    runtime: float,
    finest: int,
    widest: int,
) -> Start | None:
    """The earliest time the gang fits as running gangs end, with what it would hold on each
    node then; None when no such time is known (something runs without an end).

    Until the pass changes the cluster, the answer depends only on the running gangs (and the
    time, for a release already overdue), so the running index keeps the last one: a scheduler
    asks again for the same head of the line while the same gangs run.

    A gang reserved in the previous decisions keeps that reservation's start and nodes while
    they are free for it then, unless it fits earlier."""
    promise = state.promised.get(gang.name)
    promised = promised_assignment(state, gang.name, profile)
    pristine = state.version == 0
    if pristine:
        objects = (state.cluster.nodes, profile, allowed)
        values = (runtime, finest, widest, promise)
        memo = state.running_index.start_memo
        if memo is not None and memo[1] == values and all(map(operator.is_, memo[0], objects)):
            return _started(state, memo[2])
    promised_start = (promise.start, promised) if promise is not None and promised else None
    found = _first_fit(state, profile, allowed, runtime, finest, widest, promised_start)
    if pristine:
        state.running_index.start_memo = (objects, values, found)
    return _started(state, found)


def _started(state: CycleState, found: Start | None) -> Start | None:
    return None if found is None else (max(found[0], state.now), found[1])


def _first_fit(
    state: CycleState,
    profile: GangProfile,
    allowed: Acceptance | None,
    runtime: float,
    finest: int,
    widest: int,
    promised: Start | None,
) -> Start | None:
    """(release time, assignment) for ``earliest_start``; ``promised``: the previous
    reservation's start and assignment, taken at its time if it holds then."""
    future = FutureWalk(state.cluster)
    # Candidate start times: whenever running gangs end or earlier reservations expire.
    for when, released in itertools.groupby(releases(state), key=_TIME):
        if math.isinf(when):
            break
        for _, node_index, requests in released:
            if requests is not None:
                future.release(node_index, requests)
        start = max(when, state.now)
        window = (start, start + runtime)
        if promised is not None and start >= promised[0]:
            if future.holds(profile, promised[1], allowed, window):
                return when, promised[1]
            promised = None  # taken meanwhile: the earliest start is found anew
        assignment = future.place(profile, allowed, window, finest, widest)
        if assignment is not None:
            return when, assignment
    return None


def reserve(
    state: CycleState,
    gang: Gang,
    profile: GangProfile,
    runtime: float,
    expected: Start,
) -> None:
    """Hold what the gang needs from its earliest start (``earliest_start``) for its run."""
    start, assignment = expected
    holds = node_loads(profile, assignment)
    indexes = sorted(holds)
    state.cluster.reserve(holds, start, start + runtime)
    state.version += 1
    names = tuple(state.cluster.nodes[i].name for i in indexes)
    held = tuple(
        (state.cluster.nodes[i].name, tuple(sorted((k, v) for k, v in holds[i].items() if v))) for i in indexes
    )
    placement = tuple(sorted((member, state.cluster.nodes[i].name) for member, i in assignment))
    reservation = Reservation(gang.name, names, start, held, placement)
    state.decisions.reservations.append(reservation)
    state.first_reservation = state.first_reservation or reservation
    waits_for = holding_up(state, set(names), start)
    state.decisions.reasons[gang.name] = reasons.reserved(
        start, state.now, list(names), domain(state, indexes), waits_for
    )


def holding_up(state: CycleState, nodes: set[str], start: float) -> list[str]:
    """The gangs, running or started in this pass, that hold some of ``nodes`` until no later
    than ``start``: what a reservation there waits for, soonest ending first."""
    ending = [
        (running.expected_end, running.gang.name, state.memo.placed_by_node(running)[0])
        for running in itertools.takewhile(lambda r: r.expected_end <= start, state.running_index.by_end)
        if running.gang.name not in state.evicted
    ]
    ending += [(end, bind.gang_name, tuple(bind.placement.values())) for bind, end in state.bound_ends if end <= start]
    return [name for end, name, used in sorted(ending) if end <= start and nodes.intersection(used)]


def domain(state: CycleState, indexes: list[int]) -> str | None:
    """The finest topology domain of several nodes that holds all these nodes, as 'level name'."""
    for level in reversed(state.cluster.levels):
        domains = {level.node_domain[index] for index in indexes}
        if len(domains) == 1:
            domain = domains.pop()
            if len(level.members[domain]) > 1:
                return f"{level.name} {domain[-1]}"
    return None
