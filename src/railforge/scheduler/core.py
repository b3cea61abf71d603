"""``Scheduler(...).decide(snapshot) -> Decisions``: one pure, deterministic scheduling pass.

A cycle runs named stages (``stages``) over an explicit per-cycle state (``state.CycleState``):
``recover`` restarts or fails running gangs hit by a member failure or node loss and builds the
free-capacity view; ``admit`` fails gangs past their schedule timeout and sets aside those that
may not start; ``order`` puts the rest in service order (aged gangs first, then by fair share,
FIFO or oracle SJF); ``allocate`` tries each gang in turn: queue limits, all-or-nothing placement,
``reclaim`` of borrowed capacity when it is within quota or preemption of the gangs that
backfilled past its reservation, or, when blocked, a reservation (``reserve``; EASY: the first
blocked gang, conservative: the first K) that later gangs may not delay. Once every reservation is
made, the remaining gangs can only backfill and are tried shortest estimate first. The pass stops
as soon as no untried gang could be placed or reclaim (gangs of one placement class that failed
for a run window fail for every longer one); ``explain`` gives the rest the reasons they would
have got, worked out when first read.

A ``Scheduler`` keeps the pending and running gangs indexed from its previous call
(``incremental``) and what is derived from each snapshot object in a bounded ``Memo``, never on
the caller's objects; its decisions are those of a cold start whatever it was handed before.
``decide(snapshot)`` is a one-shot call on a fresh scheduler.
"""

from __future__ import annotations

import functools
import threading

from railforge.scheduler.cycle import CycleState
from railforge.scheduler.incremental import GangNames, PendingIndex, RunningIndex
from railforge.scheduler.memo import Memo
from railforge.scheduler.model import Decisions, Snapshot
from railforge.scheduler.stages import admit, allocate, explain, order, recover

# A gang brings at most 4 structural entries (2 key ids, a node filter, a fit when empty); a memo
# holding more than this many per gang of the snapshot, plus slack, starts afresh.
MEMO_KEYS_PER_GANG = 8
MEMO_SLACK = 4096


class Scheduler:
    """The scheduler a control loop (or a simulator) holds: it carries indexes of the pending and
    running gangs from one ``decide`` call to the next, so a call pays for what changed since
    the previous one. Calls, and the first read of each call's deferred reasons (which reads the
    memo), are serialised by one lock: one object may be shared across threads, and a dashboard
    may read the last decisions while the loop decides the next, though a loop gains from its
    indexes only when it is the one feeding it snapshots."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._memo: Memo | None = None
        self._pending: PendingIndex | None = None
        self._running: RunningIndex | None = None

    def decide(self, snapshot: Snapshot) -> Decisions:
        """Decide binds, evictions, restarts, failures and reservations for one snapshot."""
        with self._lock:
            decisions = run_cycle(CycleState(snapshot, *self.indexes_for(snapshot)))
        decisions.reasons.fill_under(self._lock)
        return decisions

    def indexes_for(self, snapshot: Snapshot) -> tuple[Memo, PendingIndex, RunningIndex]:
        """The memo and indexes of the previous call; fresh ones when the queues changed. The memo
        keeps a few entries per gang of the snapshot: beyond that it forgets the objects gone, and
        it starts afresh, with the indexes that hold its key ids, when the structural keys (node
        selectors, pod shapes) of gangs long gone pile up."""
        queues = snapshot.queues
        pending = self._pending
        gangs = len(snapshot.pending) + len(snapshot.running)
        if (
            pending is None
            or self._memo is None
            or self._running is None
            or (pending.queues is not queues and pending.queues != tuple(queues))
            or self._memo.key_entries() > MEMO_KEYS_PER_GANG * gangs + MEMO_SLACK
        ):
            self._memo = Memo()
            names = GangNames()
            pending = self._pending = PendingIndex(self._memo, tuple(queues), names)
            self._running = RunningIndex(self._memo, names)
        elif self._memo.object_entries() > 2 * gangs + MEMO_SLACK:
            self._memo.keep_only(snapshot)
        return self._memo, pending, self._running


def decide(snapshot: Snapshot) -> Decisions:
    """One-shot ``Scheduler().decide(snapshot)``: nothing is kept between calls. A loop deciding
    on snapshot after snapshot holds a ``Scheduler`` instead."""
    return Scheduler().decide(snapshot)


def settled(state: CycleState) -> bool:
    """True when no gang left untried can change the cluster: none can be placed, every
    reservation is made and none can reclaim. The pass then stops; the rest only get reasons."""
    return (
        state.shortcuts
        and (state.cluster.total_free_gpu < state.min_gpu or not state.open_classes)
        and state.reservations_made >= state.depth
        and frozen(state)
    )


def settle(state: CycleState, key: int) -> None:
    """Close the class once none of its untried gangs can be placed: placement failed for a run
    window no longer than theirs (capacity only shrinks until a reclaim reopens every class)."""
    if key in state.open_classes:
        cached = state.failure_cache.get(key)
        runtime = state.untried_runtime(key)
        if runtime is None or (cached is not None and cached[0] <= runtime):
            state.open_classes.discard(key)


def frozen(state: CycleState) -> bool:
    """True when no gang still waiting can evict: only the first blocked gangs may reclaim,
    only the first may preempt."""
    return not (state.can_reclaim or state.can_preempt) or state.blocked >= max(state.depth, 1)


def run_cycle(state: CycleState) -> Decisions:
    """Run the stages over one cycle's state; the decisions."""
    cluster = recover.run(state)
    decisions = state.decisions
    index = admit.index_waiting(state)
    head_blocker: str | None = None
    skip_ahead = state.config.skip_ahead
    # The pass stops early once nothing that is left can change the cluster: then every
    # remaining gang's reason depends only on the (frozen) state, not on its turn.
    classes = state.classes = index.classes
    state.min_gpu = index.min_required_gpu
    state.cursor = dict.fromkeys(classes, 0)
    state.open_classes = set(classes)
    tried = state.tried
    stopped = False
    gangs = iter(order.service_order(state, index, cluster.total_gpu))
    reorder = state.depth > 0 and state.config.backfill_order != "fair"
    while (gang := next(gangs, None)) is not None:
        if head_blocker is not None and not skip_ahead:
            break
        if stopped or settled(state):
            stopped = True
            if skip_ahead:
                break
            # Strict order still names its head: the first gang blocked on capacity.
            tried.add(gang.name)
            if explain.frozen_reason(state, gang):
                head_blocker = gang.name
            continue
        tried.add(gang.name)
        profile = state.memo.profile(gang)
        if not allocate.try_start(state, gang, profile):
            head_blocker = head_blocker or gang.name
        settle(state, profile.failure_key)
        if reorder and state.reservations_made >= state.depth:
            # Every reservation is made, so the rest can only backfill: shortest estimate first.
            reorder = False
            gangs = order.backfill_order(state)
    if len(tried) < len(index.by_age):
        decisions.reasons.defer(functools.partial(explain.explain_untried, state, list(index.by_age), head_blocker))
    decisions.stats.update(
        pending=len(state.snapshot.pending),
        bound=len(decisions.binds),
        reservations=len(decisions.reservations),
        evictions=len(decisions.evictions),
        free_gpus=cluster.total_free_gpu,
    )
    return decisions
