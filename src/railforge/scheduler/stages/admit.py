"""Admit: which waiting gangs the cycle may try, and the checks that need no placement.

Gangs past their schedule timeout fail, gangs in restart backoff wait, and gangs of a queue that
is not declared wait; the rest are indexed into placement classes (``incremental.PendingIndex``).
At its turn a gang is kept out by its queue's limits (or an ancestor's), or refused for good when
it does not fit even the empty cluster (``unfit``) or requires a topology level the scheduler has
no name for: such a gang holds nobody up, takes no reservation and reclaims nothing.
"""

from __future__ import annotations

import itertools

from railforge.scheduler import reasons
from railforge.scheduler.cycle import CycleState
from railforge.scheduler.incremental import AGE_ORDER, PendingIndex
from railforge.scheduler.model import GPU, Fail, Gang, Reason
from railforge.scheduler.placement import (
    NODE_RULES,
    PIN_PROBLEMS,
    Acceptance,
    GangProfile,
    is_spread_key,
    node_loads,
)


def index_waiting(state: CycleState) -> PendingIndex:
    """The gangs that may start now, indexed: the others fail or get their reason here (the
    index leaves out the gangs of a queue that is not declared)."""
    pending = state.snapshot.pending
    decisions = state.decisions
    index = state.pending_index.update(pending, state.class_record)
    repeated = index.names.repeated if index.names is not None else ()
    if repeated:
        raise ValueError(
            f"gang name {min(repeated)!r} is used more than once among the pending and running gangs; "
            "expected one gang per name"
        )
    # Only gangs with a timeout or a backoff can be held back.
    timed = sorted(itertools.chain(index.timed.values(), index.undeclared.values()), key=AGE_ORDER)
    held_back = set()
    for gang in timed:
        timeout = gang.schedule_timeout
        backoff_end = gang.not_before
        waiting_since = gang.submit_time if backoff_end is None else max(gang.submit_time, backoff_end)
        indexed = gang.queue in index.declared  # the index leaves the others out already
        if timeout is not None and state.now - waiting_since > timeout:
            decisions.failures.append(Fail(gang.name, reasons.schedule_timeout(timeout)))
        elif backoff_end is not None and backoff_end > state.now:
            decisions.reasons[gang.name] = reasons.backoff(backoff_end)
        elif not indexed:
            decisions.reasons[gang.name] = reasons.undeclared_queue(gang.queue)
        else:
            continue
        if indexed:
            held_back.add(gang.name)
    if held_back:
        waiting = [gang for gang in pending if gang.name not in held_back]
        index = PendingIndex(state.memo, index.queues).update(waiting, state.class_record)
    return index


def limit_reason(state: CycleState, queue: str, profile: GangProfile) -> Reason | None:
    """Why the queue's limits (or an ancestor's) keep this gang out; None when they do not.
    Only queues with a limit somewhere on their path pay for the check."""
    if not state.queue_limited(queue):
        return None
    over = state.usage.over_limit(queue, profile.admission)
    if over is None:
        return None
    name, resource, limit = over
    if profile.admission[resource] > limit:
        return reasons.over_limit_alone(name, resource, profile.admission[resource], limit)
    return reasons.at_limit(name, resource, limit)


def never_starts(state: CycleState, gang: Gang, profile: GangProfile) -> bool:
    """True when the gang does not fit even the empty cluster (``unfit``, ``unknown_level``)."""
    key = profile.failure_key
    if key in state.unfit_keys or unknown_level(state, gang, key):
        return True
    finest, widest = state.levels_for(gang, profile)
    return unfit(state, gang, profile, state.cluster.allowed_nodes(gang, profile), finest, widest)


def unfit(
    state: CycleState, gang: Gang, profile: GangProfile, allowed: Acceptance | None, finest: int, widest: int
) -> bool:
    """True when the gang does not fit even the empty cluster (more GPUs than the nodes it may
    use hold, say); its reason, kept for its placement class, says what it lacks."""
    if state.cluster.fits_when_empty(profile, allowed, finest, widest):
        return False
    return refuse(state, profile.failure_key, unfit_reason(state, gang, profile, allowed, widest))


def unknown_level(state: CycleState, gang: Gang, key: int) -> bool:
    """True when the gang requires a topology level the scheduler has no name for (a typo, or
    other ``topology_level_names``): it cannot be honoured, so the gang is refused as unfit."""
    constraint = gang.topology
    if constraint is None or not constraint.required or constraint.level in state.level_names:
        return False
    return refuse(state, key, reasons.unknown_level(constraint.level, state.level_names))


def refuse(state: CycleState, key: int, reason: Reason) -> bool:
    """Mark the placement class as one that never starts (see ``unfit``), with its reason."""
    state.unfit_keys.add(key)
    state.failure_cache[key] = (0.0, reason)  # fails for every run time: the class closes
    return True


def unfit_reason(
    state: CycleState, gang: Gang, profile: GangProfile, allowed: Acceptance | None, widest: int
) -> Reason:
    """What the gang lacks on the empty cluster: a node large enough for one of its pods, on any
    node (the real limit, before any rule that keeps it off nodes); GPUs on the nodes it may use
    (naming the rules that rule nodes out); for a gang that pins its members, what its pins lack
    (``unfit_pinned_reason``); GPUs in its widest domain, or in one domain of its ``Together``; the
    domains its spreads need; room for the pods of one shape, for one
    resource; else its pods' requests together."""
    cluster = state.cluster
    for shape in profile.required_shapes:
        for name, each in ((GPU, shape.gpu), *shape.others):
            if is_spread_key(name):
                continue
            largest = max((node.allocatable.get(name, 0) for node in cluster.nodes), default=0)
            if each > largest:
                return reasons.larger_than_any_node(len(shape.member_names), name, each, largest)
    usable = [node for index, node in enumerate(cluster.nodes) if allowed is None or allowed[index]]
    capacity = [
        node.allocatable.get(GPU, 0) if allowed is None or allowed[index] else 0
        for index, node in enumerate(cluster.nodes)
    ]
    need = profile.required_gpu
    if need > sum(capacity):
        return reasons.unfit_total(
            need, sum(capacity), *(excluded(state, gang, profile) if allowed is not None else ())
        )
    if profile.pins:
        return unfit_pinned_reason(state, profile, allowed, widest)
    if widest >= 0:
        domains = cluster.levels[widest].members.values()
        best = max((sum(capacity[index] for index in members) for members in domains), default=0)
        if need > best:
            return reasons.unfit_domain(need, state.level_names[widest], best)
    if gang.together is not None:
        level = f"{gang.together.topology_key} domain"
        together = cluster.label_domains(gang.together.topology_key).values()
        best = max((sum(capacity[index] for index in members) for members in together), default=0)
        if need > best:
            return reasons.unfit_domain(need, level, best)
    required = {member.name for member in profile.members[: gang.required_members]}
    for _, members, spread, _ in profile.spreads:
        count = len(members & required)
        asks = [member.requests for member in profile.members if member.name in members]
        hosts = [
            node
            for node in usable
            if any(all(node.allocatable.get(name, 0) >= each for name, each in one.items()) for one in asks)
        ]  # the nodes that could hold one of its pods
        room = spread.room_on(hosts)
        if spread.required and room is not None and count > room:
            return reasons.spread_short(count, spread, room)
    requested: set[str] = set()
    for shape in profile.required_shapes:
        for name, each in ((GPU, shape.gpu), *shape.others):
            if each and not is_spread_key(name):
                requested.add(name)
                room = sum(node.allocatable.get(name, 0) // each for node in usable)
                if room < len(shape.member_names):
                    return reasons.unfit_pods(len(shape.member_names), name, each, room)
    return reasons.unfit_requests(sorted(requested))


def unfit_pinned_reason(state: CycleState, profile: GangProfile, allowed: Acceptance | None, widest: int) -> Reason:
    """Why a gang that pins its members never fits: the first pinned node that is not a
    schedulable, ready node, that its node rules rule out, that lies in another domain of its
    required level than the first, or whose allocatable is too little for the members pinned there."""
    cluster = state.cluster
    assignment, problem = cluster.pinned_nodes(profile, allowed, widest)
    if problem is not None:
        member, node, kind = problem
        words = {
            PIN_PROBLEMS[0]: "is not a schedulable, ready node",
            PIN_PROBLEMS[1]: "the gang's node rules rule out",
            PIN_PROBLEMS[2]: f"is in another {state.level_names[widest]} than node {profile.pins[0][1]}",
        }
        return reasons.unfit_pinned(member, node, words[kind])
    loads = node_loads(profile, assignment[: len(profile.required_pins)])
    for position in sorted(loads):
        pinned = cluster.nodes[position]
        for name, need in sorted(loads[position].items()):
            if need > pinned.allocatable.get(name, 0):
                member = next(member for member, index in assignment if index == position)
                has = reasons.amount(name, pinned.allocatable.get(name, 0))
                lack = f"has {has} allocatable; its members there need {reasons.amount(name, need)}"
                return reasons.unfit_pinned(member, pinned.name, lack)
    return reasons.unfit_requests(sorted({name for load in loads.values() for name in load}))


def excluded(state: CycleState, gang: Gang, profile: GangProfile) -> tuple[str, list[str]]:
    """(how many schedulable nodes each of the gang's node rules keeps it off, in words; the
    ``NODE_RULES`` that keep it off some)."""
    counts = state.cluster.broken_rule_counts(gang, profile)
    rules = [rule for rule in NODE_RULES if counts.get(rule)]
    return reasons.excluded([(rule_text(gang, rule), counts[rule]) for rule in rules]), rules


def rule_text(gang: Gang, rule: str) -> str:
    if rule == NODE_RULES[0]:
        return "its node selector " + ",".join(f"{key}={value}" for key, value in sorted(gang.node_selector.items()))
    if rule == NODE_RULES[1]:
        terms = (" ".join((req.key, req.operator, ",".join(req.values))).strip() for req in gang.affinity)
        return f"its node affinity ({'; '.join(terms)})"
    return "a taint it does not tolerate"
