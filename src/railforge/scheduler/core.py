"""``decide(snapshot) -> Decisions``: one pure, deterministic scheduling pass.

Steps: (1) restart or fail running gangs hit by a member failure or node loss; (2) build the
free-capacity view and queue usage; (3) fail pending gangs past their schedule timeout; (4) order
the rest (aged gangs first, then by fair share, FIFO or oracle SJF); (5) for each gang: check its
queue limits, place it all-or-nothing, reclaim borrowed capacity when it is within quota, preempt
the gangs of its queue that backfilled past its reservation when they alone keep it from starting
now, or, when blocked, give it a reservation (EASY: the first blocked gang; conservative: the first
K) that later gangs may not delay. Once every reservation is made, the remaining gangs can only backfill
and are tried shortest estimate first. The pass stops as soon as no untried gang could be placed
or reclaim (gangs of one placement class that failed for a run window fail for every longer one);
the rest get the reasons they would have got, worked out when first read (``Reasons``).

The pending and running gangs are indexed incrementally from the previous call in the same thread
(``incremental``), and what is derived from each snapshot object is kept in a bounded ``Memo``,
never on the caller's objects; the decisions are those of a cold start whatever that call was
handed.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import operator
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from railforge.scheduler import reasons
from railforge.scheduler.fairshare import QueueTree, Usage, fair_shares
from railforge.scheduler.incremental import (
    AGE_ORDER,
    ClassEntry,
    PendingIndex,
    RunningIndex,
    queue_order_key,
    thread_state,
)
from railforge.scheduler.model import (
    GPU,
    Bind,
    Decisions,
    Evict,
    EvictCause,
    Fail,
    Gang,
    Reservation,
    Resources,
    Restart,
    RunningGang,
    Snapshot,
    add_resources,
)
from railforge.scheduler.placement import (
    NODE_RULES,
    Acceptance,
    Assignment,
    Cluster,
    FutureWalk,
    GangProfile,
    node_loads,
)

LN2 = math.log(2)
_SUBMIT_TIME = operator.attrgetter("submit_time")
_TIME = operator.itemgetter(0)
Start = tuple[float, Assignment]  # a reservation's time and where its members go then


class Claim(NamedTuple):
    """What a gang that evicts (reclaim, preemption) asks room for: its placement request as
    ``Cluster.place`` takes it, running from now to ``end``."""

    profile: GangProfile
    allowed: Acceptance | None
    end: float
    finest: int
    widest: int


def decide(snapshot: Snapshot) -> Decisions:
    """Decide binds, evictions, restarts, failures and reservations for one snapshot."""
    return _Pass(snapshot).run()


def reaches(amounts: Iterable[int], target: int) -> bool:
    """Whether the amounts add up to ``target``; stops reading them as soon as they do."""
    total = 0
    for amount in amounts:
        total += amount
        if total >= target:
            return True
    return target <= 0


def quota_ratio(gpus: float, quota: float) -> float:
    """GPUs held per GPU of quota; infinite for a queue without a GPU quota (it is owed nothing)."""
    return gpus / quota if quota > 0 else math.inf


class _Pass:
    """State of one decide() call."""

    # Stop the pass, or skip a class's gangs, once they cannot change the cluster (their reasons
    # are then worked out as those of untried gangs). Off, every waiting gang is tried in turn:
    # the tests' reference for what the shortcuts must not change.
    shortcuts = True

    def __init__(self, snapshot: Snapshot):
        self.snapshot = snapshot
        self.config = snapshot.config
        self.now = snapshot.now
        self.decisions = Decisions()
        self.tree = QueueTree(snapshot.queues)
        self.usage = Usage(self.tree)
        self.level_names = self.config.topology_level_names
        self.memo, self.pending_index, self.running_index = thread_state(snapshot)
        self.evicted: set[str] = set()
        self.bound_releases: list[tuple[float, int, dict]] = []
        self.bound_ends: list[tuple[Bind, float]] = []  # the binds of this pass with their expected ends
        self.failure_cache: dict[int, tuple[float, str]] = {}  # failure key -> (run time, reason)
        self.unfit_keys: set[int] = set()  # failure keys of gangs that do not fit the empty cluster
        self.reservations_made = 0
        self.depth = {"none": 0, "easy": 1}.get(self.config.backfill, self.config.reservation_depth)
        self.first_reservation: Reservation | None = None
        self.promised = {reservation.gang_name: reservation for reservation in snapshot.reservations}
        self.limited: dict[str, bool] = {}  # queue -> some queue on its path has a limit
        self.version = 0  # bumped whenever binds, evictions or reservations change the cluster
        self.blocked = 0  # gangs blocked on capacity so far; only the first ones may reclaim
        self.borrow_cache: dict[tuple, tuple[int, bool]] = {}  # (queue, charge) -> (version, borrows)
        self.allowed_views: dict[int, tuple[int, list[int], list[dict[str, int]]]] = {}  # see allowed_free
        # Waiting gangs by failure key as (run time, queue order, gang), shortest first (the backfill
        # order; from the PendingIndex), and a cursor past the ones already tried; a key is "open"
        # while one of its untried gangs might still be placed.
        self.classes: dict[int, list[ClassEntry]] = {}
        self.cursor: dict[int, int] = {}
        self.open_classes: set[int] = set()
        self.tried: set[str] = set()

    # -- running gangs -------------------------------------------------------------------------

    def handle_failures(self) -> None:
        """Sort the running gangs into survivors and gangs to restart or fail; index the survivors.
        A gang fails when a member failed, or a node it uses is lost, not ready, or has a NoExecute
        taint the gang does not tolerate (Kubernetes evicts such pods)."""
        index = self.running_index.update(self.snapshot.running)
        ready = set()
        evicting = set()  # nodes with a NoExecute taint
        for node in self.snapshot.nodes:
            if node.ready:
                ready.add(node.name)
            if node.taints and any(taint.effect == "NoExecute" for taint in node.taints):
                evicting.add(node.name)
        if not index.failed and ready.issuperset(index.node_gangs) and evicting.isdisjoint(index.node_gangs):
            return
        nodes = {node.name: node for node in self.snapshot.nodes}
        survivors = []
        for running in sorted(self.snapshot.running, key=lambda r: r.gang.name):
            problem = None
            used = self.memo.placed_by_node(running)[0]
            if not running.failed_members and ready.issuperset(used) and evicting.isdisjoint(used):
                survivors.append(running)
                continue
            if running.failed_members:
                problem = f"member {sorted(running.failed_members)[0]} failed"
            else:
                for member, node_name in sorted(running.placement.items()):
                    node = nodes.get(node_name)
                    if node is None or not node.ready:
                        problem = f"node {node_name} of member {member} is lost or not ready"
                        break
                    evicted_by = [
                        taint
                        for taint in node.taints
                        if taint.effect == "NoExecute" and not running.gang.tolerates(taint)
                    ]
                    if evicted_by:
                        problem = (
                            f"node {node_name} of member {member} has taint {evicted_by[0].key}:NoExecute, "
                            "which the gang does not tolerate"
                        )
                        break
            if problem is None:
                survivors.append(running)
                continue
            gang = running.gang
            limit = self.config.max_restarts
            if self.config.failure_policy == "fail" or (limit is not None and gang.restart_count >= limit):
                self.decisions.failures.append(Fail(gang.name, problem))
            else:
                delay = self.config.restart_delay(gang.restart_count)
                self.decisions.restarts.append(
                    Restart(gang.name, self.now + delay, f"{problem}; restarting the whole gang")
                )
        self.running_index = RunningIndex(self.memo).update(survivors)

    def build_cluster(self) -> Cluster:
        """The free-capacity view and queue usage of the survivors (``running_index``)."""
        index = self.running_index
        for queue in sorted(index.by_queue):
            self.usage.add(queue, index.by_queue[queue])
        static = self.memo.static(self.snapshot.nodes, tuple(self.level_names), tuple(self.config.topology_label_keys))
        return Cluster(static, index.used, index.use_version)

    def may_reclaim(self, running: RunningGang) -> bool:
        return self.now - running.start_time >= self.config.min_runtime_before_reclaim

    def may_preempt(self, gang: Gang) -> bool:
        """Gangs started past the gang's reservation still run, and preemption is on."""
        return self.can_preempt and gang.name in self.running_index.backfilled

    @functools.cached_property
    def can_preempt(self) -> bool:
        """Preemption is on and some running gang started past a reservation holder."""
        return self.config.preempt_backfill and bool(self.running_index.backfilled)

    @functools.cached_property
    def can_reclaim(self) -> bool:
        """Reclaim is on and some borrowed gang has run its minimum runtime."""
        return self.config.reclaim and any(map(self.may_reclaim, self.running_index.borrowed.values()))

    @functools.cached_property
    def reclaimable(self) -> list[RunningGang]:
        """Possible reclaim victims, in victim order."""
        return sorted(filter(self.may_reclaim, self.running_index.borrowed.values()), key=self.victim_order)

    def eviction_budget(self, profile: GangProfile, wait: float) -> float:
        """The work one claim (reclaim or preemption) may destroy: ``reclaim_cost_limit`` times the
        claimer's GPUs x ``wait``, the time it would wait otherwise."""
        cost_limit = self.config.reclaim_cost_limit
        return math.inf if cost_limit is None else cost_limit * profile.gpu * wait

    def lost_work(self, running: RunningGang) -> float:
        """What evicting the gang destroys: its GPUs x its run time so far."""
        return self.memo.placed_by_node(running)[2].get(GPU, 0) * (self.now - running.start_time)

    def victim_order(self, running: RunningGang) -> tuple:
        """Evict the lowest priority first, then the least progress (the least work lost)."""
        return running.gang.priority, self.now - running.start_time, running.gang.name

    # -- ordering ------------------------------------------------------------------------------

    def runtime(self, gang: Gang) -> float:
        if gang.max_runtime is not None:
            return gang.max_runtime
        default = self.tree.get(gang.queue).default_max_runtime
        return math.inf if default is None else default

    def class_record(self, gang: Gang) -> tuple[int, int, ClassEntry]:
        """(failure key, required GPUs, class entry) of a waiting gang; the entry, (run time, queue
        order, gang), sorts a class shortest first."""
        profile = self.memo.profile(gang)
        return profile.failure_key, profile.required_gpu, (self.runtime(gang), queue_order_key(gang), gang)

    def order(self, index: PendingIndex, capacity: int) -> Iterable[Gang]:
        """Gangs in service order; the fair order is produced lazily, so a pass that stops early
        (see ``run``) does not pay for ordering the gangs it never tries."""
        config = self.config
        by_age = index.by_age
        cutoff = -math.inf if config.aging_bound is None else self.now - config.aging_bound
        aged = by_age[: bisect_right(by_age, cutoff, key=_SUBMIT_TIME)]  # served first, oldest first
        rest: Iterable[Gang]
        if config.order == "fifo":  # the queues' lists merged: a strict order stops at its head
            rest = heapq.merge(*index.by_queue.values(), key=queue_order_key)
            if aged:
                rest = (gang for gang in rest if gang.submit_time > cutoff)
        elif config.order == "sjf_oracle":
            rest = sorted(by_age[len(aged) :], key=lambda g: (self.oracle_runtime(g), g.submit_time, g.name))
        else:
            rest = self.fair_order(index, aged, cutoff, capacity)
        return itertools.chain(aged, rest)

    def oracle_runtime(self, gang: Gang) -> float:
        return gang.oracle_runtime if gang.oracle_runtime is not None else self.runtime(gang)

    def fair_order(self, index: PendingIndex, aged: list[Gang], cutoff: float, capacity: int) -> Iterator[Gang]:
        """Repeatedly serve the queue whose service is furthest below its fair share, as if each
        gang taken were started; within a queue: priority, then age. The ``aged`` gangs (served
        before this order) are left out, their demand too."""
        by_queue = index.by_queue
        demand: dict[str, float] = dict(index.demand)
        aged_count: dict[str, int] = {}
        for gang in aged:
            aged_count[gang.queue] = aged_count.get(gang.queue, 0) + 1
            demand[gang.queue] -= self.memo.profile(gang).gpu
        served = [queue for queue in by_queue if aged_count.get(queue, 0) < len(by_queue[queue])]
        for queue in aged_count.keys() - served:
            del demand[queue]  # every gang it has waiting is aged
        for queue, charge in self.running_index.by_queue.items():
            demand[queue] = demand.get(queue, 0) + charge.get(GPU, 0)
        shares = fair_shares(self.tree, demand, capacity)
        half_life = self.config.fair_share_half_life
        usage = self.snapshot.usage

        def next_position(queued: list[Gang], position: int) -> int:
            while aged and position < len(queued) and queued[position].submit_time <= cutoff:
                position += 1
            return position

        # Served GPUs: the mean of the GPUs held now and the time-averaged GPUs implied by the
        # decayed usage; a queue is keyed by (served / share, served, -priority, name).
        heap = []
        constants: dict[str, tuple[float, float, float, int]] = {}
        allocated: dict[str, float] = {}
        for queue in served:
            if half_life <= 0 or queue not in usage:
                scale, offset = 1.0, 0.0
            else:
                scale, offset = 0.5, usage[queue] * LN2 / half_life / 2
            share = shares.get(queue, 0.0)
            priority = -self.tree.get(queue).priority
            constants[queue] = (scale, offset, share, priority)
            held = allocated[queue] = self.usage.gpus(queue)
            load = held * scale + offset if scale != 1.0 else held
            position = next_position(by_queue[queue], 0)
            heap.append(((load / share if share > 0 else math.inf, load, priority, queue), queue, position))
        heapq.heapify(heap)
        replace, pop = heapq.heapreplace, heapq.heappop
        while heap:
            _, queue, position = heap[0]
            queued = by_queue[queue]
            gang = queued[position]
            yield gang
            held = allocated[queue] = allocated[queue] + self.memo.profile(gang).gpu
            position = next_position(queued, position + 1)
            if position < len(queued):
                scale, offset, share, priority = constants[queue]
                load = held * scale + offset if scale != 1.0 else held
                ratio = load / share if share > 0 else math.inf
                replace(heap, ((ratio, load, priority, queue), queue, position))
            else:
                pop(heap)

    # -- the pass ------------------------------------------------------------------------------

    def run(self) -> Decisions:
        self.handle_failures()
        cluster = self.cluster = self.build_cluster()
        decisions = self.decisions
        index = self.index_waiting()
        head_blocker: str | None = None
        skip_ahead = self.config.skip_ahead
        # The pass stops early once nothing that is left can change the cluster: then every
        # remaining gang's reason depends only on the (frozen) state, not on its turn.
        classes = self.classes = index.classes
        self.min_gpu = index.min_required_gpu
        self.cursor = dict.fromkeys(classes, 0)
        self.open_classes = set(classes)
        tried = self.tried
        settled = False
        gangs = iter(self.order(index, cluster.total_gpu))
        reorder = self.depth > 0 and self.config.backfill_order == "shortest"
        while (gang := next(gangs, None)) is not None:
            if head_blocker is not None and not skip_ahead:
                break
            if settled or self.settled():
                settled = True
                if skip_ahead:
                    break
                # Strict order still names its head: the first gang blocked on capacity.
                tried.add(gang.name)
                if self.frozen_reason(gang):
                    head_blocker = gang.name
                continue
            tried.add(gang.name)
            if not self.try_start(gang):
                head_blocker = head_blocker or gang.name
            self.settle(self.memo.profile(gang).failure_key)
            if reorder and self.reservations_made >= self.depth:
                # Every reservation is made, so the rest can only backfill: shortest estimate first.
                reorder = False
                gangs = self.backfill_order()
        if len(tried) < len(index.by_age):
            decisions.reasons.defer(functools.partial(self.explain_untried, list(index.by_age), head_blocker))
        decisions.stats.update(
            pending=len(self.snapshot.pending),
            bound=len(decisions.binds),
            reservations=len(decisions.reservations),
            evictions=len(decisions.evictions),
            free_gpus=cluster.total_free_gpu,
        )
        return decisions

    def backfill_order(self) -> Iterator[Gang]:
        """The untried gangs, shortest estimate first: the classes' sorted lists merged, with one
        heap entry per class. A closed class's gangs are not tried: each would fail as the class
        did (no reclaim reopens it once every reservation is made), so they get their reasons as
        untried gangs; unless a queue has a limit, which could give one another reason at its turn.
        """
        classes, cursor = self.classes, self.cursor
        skip_closed = self.shortcuts and not any(queue.limit for queue in self.snapshot.queues)
        heap = [(classes[key][cursor[key]], key) for key in classes if self.untried_runtime(key) is not None]
        heapq.heapify(heap)
        while heap:
            entry, key = heap[0]
            yield entry[2]
            if (skip_closed and key not in self.open_classes) or self.untried_runtime(key) is None:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (classes[key][cursor[key]], key))

    def index_waiting(self) -> PendingIndex:
        """The gangs that may start now, indexed (``incremental.PendingIndex``): gangs past their
        schedule timeout fail, gangs in restart backoff wait, and so do gangs of a queue that is not
        declared (the index leaves those out)."""
        pending = self.snapshot.pending
        index = self.pending_index.update(pending, self.class_record)
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
            if timeout is not None and self.now - waiting_since > timeout:
                self.decisions.failures.append(Fail(gang.name, reasons.schedule_timeout(timeout)))
            elif backoff_end is not None and backoff_end > self.now:
                self.decisions.reasons[gang.name] = reasons.backoff(backoff_end - self.now)
            elif not indexed:
                self.decisions.reasons[gang.name] = reasons.undeclared_queue(gang.queue)
            else:
                continue
            if indexed:
                held_back.add(gang.name)
        if held_back:
            waiting = [gang for gang in pending if gang.name not in held_back]
            index = PendingIndex(self.memo, index.queues).update(waiting, self.class_record)
        return index

    def explain_untried(self, waiting: list[Gang], head_blocker: str | None) -> None:
        """The reasons of the gangs the pass did not try."""
        strict = head_blocker is not None and not self.config.skip_ahead
        tried = self.tried
        for gang in waiting:
            if gang.name not in tried:
                if strict and not self.never_starts(gang):
                    self.decisions.reasons[gang.name] = reasons.strict_order(head_blocker)
                else:
                    self.frozen_reason(gang)

    def never_starts(self, gang: Gang) -> bool:
        """True when the gang does not fit even the empty cluster (``unfit``, ``unknown_level``):
        its reason says so, rather than that it waits behind the head of a strict order."""
        profile = self.memo.profile(gang)
        key = profile.failure_key
        if key in self.unfit_keys or self.unknown_level(gang, key):
            return True
        finest, widest = self.levels_for(gang, profile)
        return self.unfit(gang, profile, self.cluster.allowed_nodes(gang, profile), finest, widest)

    def settled(self) -> bool:
        """True when no gang left untried can change the cluster: none can be placed, every
        reservation is made and none can reclaim. The pass then stops; the rest only get reasons."""
        return (
            self.shortcuts
            and (self.cluster.total_free_gpu < self.min_gpu or not self.open_classes)
            and self.reservations_made >= self.depth
            and self.frozen()
        )

    def untried_runtime(self, key: int) -> float | None:
        """The shortest run time among the class's gangs not tried yet; None when none is left."""
        members = self.classes[key]
        position = self.cursor[key]
        tried = self.tried
        while position < len(members) and members[position][2].name in tried:
            position += 1
        self.cursor[key] = position
        return members[position][0] if position < len(members) else None

    def settle(self, key: int) -> None:
        """Close the class once none of its untried gangs can be placed: placement failed for a run
        window no longer than theirs (capacity only shrinks until a reclaim reopens every class)."""
        if key in self.open_classes:
            cached = self.failure_cache.get(key)
            runtime = self.untried_runtime(key)
            if runtime is None or (cached is not None and cached[0] <= runtime):
                self.open_classes.discard(key)

    def frozen(self) -> bool:
        """True when no gang still waiting can evict: only the first blocked gangs may reclaim,
        only the first may preempt."""
        return not (self.can_reclaim or self.can_preempt) or self.blocked >= max(self.depth, 1)

    def queue_limited(self, queue: str) -> bool:
        """Whether some queue on the queue's path has a limit (cached per queue)."""
        limited = self.limited.get(queue)
        if limited is None:
            limited = self.limited[queue] = any(self.tree.get(name).limit for name in self.tree.path(queue))
        return limited

    def limit_reason(self, queue: str, profile: GangProfile) -> str | None:
        """Why the queue's limits (or an ancestor's) keep this gang out; None when they do not.
        Only queues with a limit somewhere on their path pay for the check."""
        if not self.queue_limited(queue):
            return None
        over = self.usage.over_limit(queue, profile.admission)
        if over is None:
            return None
        name, resource, limit = over
        if profile.admission[resource] > limit:
            return reasons.over_limit_alone(name, resource, profile.admission[resource], limit)
        return reasons.at_limit(name, resource, limit)

    def frozen_reason(self, gang: Gang) -> bool:
        """Record the reason of a gang left untried by a settled pass, what try_start would record;
        True when the gang is blocked on capacity (not by its queue's limit)."""
        profile = self.memo.profile(gang)
        limit_reason = self.limit_reason(gang.queue, profile)
        if limit_reason is not None:
            self.decisions.reasons[gang.name] = limit_reason
            return False
        key = profile.failure_key
        runtime = self.runtime(gang)
        cached = self.failure_cache.get(key)
        if cached is None or runtime < cached[0]:
            if not self.never_starts(gang):
                finest, widest = self.levels_for(gang, profile)
                allowed = self.cluster.allowed_nodes(gang, profile)
                self.failure_cache[key] = (runtime, self.capacity_reason(gang, profile, allowed, finest, widest))
            cached = self.failure_cache[key]
        self.decisions.reasons[gang.name] = cached[1]
        return key not in self.unfit_keys

    def levels_for(self, gang: Gang, profile: GangProfile) -> tuple[int, int]:
        """(finest, widest) topology level indexes to try; -1 is the whole cluster."""
        finest = len(self.level_names) - 1
        constraint = gang.topology
        widest = -1
        if constraint is not None and constraint.required and constraint.level in self.level_names:
            widest = self.level_names.index(constraint.level)
        if profile.required_gpu == 0:
            finest = widest  # CPU-only gangs need no GPU locality
        return finest, widest

    def try_start(self, gang: Gang) -> bool:
        """Start the gang, or record why it cannot; False when it is blocked on capacity.

        Cheap checks come first: the queue limit only for queues that have one on their path, then
        the per-shape failure cache (placement cannot succeed for a gang whose shape already failed
        with a run window no longer than this one, since capacity only shrinks between reclaims).
        Only the gangs at the head of the line (the first blocked ones: those that get the
        reservations, or the first one without backfill) may reclaim, when within quota; only the
        first may preempt what backfilled past it.
        """
        profile = self.memo.profile(gang)
        decisions = self.decisions
        queue = gang.queue
        limit_reason = self.limit_reason(queue, profile)
        if limit_reason is not None:
            decisions.reasons[gang.name] = limit_reason
            return True
        key = profile.failure_key
        if key in self.unfit_keys or self.unknown_level(gang, key):
            decisions.reasons[gang.name] = self.failure_cache[key][1]
            return True
        cluster = self.cluster
        runtime = self.runtime(gang)
        end = self.now + runtime
        cached = self.failure_cache.get(key)
        fresh = cached is None or runtime < cached[0]
        head = self.blocked < max(self.depth, 1)
        allowed: Acceptance | None = None
        finest = widest = -1
        promised = self.promised_assignment(gang.name, profile)
        if fresh or head or promised:  # placement, the reservation and reclaim need the node filter and levels
            allowed = cluster.allowed_nodes(gang, profile)
            finest, widest = self.levels_for(gang, profile)
        assignment = None
        if promised and cluster.holds(profile, promised, allowed, (self.now, end)):
            assignment = promised
        elif fresh:
            assignment = cluster.place(profile, allowed, (self.now, end), finest, widest)
        if assignment is None and fresh and self.unfit(gang, profile, allowed, finest, widest):
            decisions.reasons[gang.name] = self.failure_cache[key][1]
            return True
        expected: Start | None = None
        declined: list[tuple[str, str]] = []  # (action, why) of each eviction the gang declined
        reclaims = assignment is None and head and self.can_reclaim
        if reclaims and not self.borrows(queue, profile):
            expected = self.earliest_start(gang, profile, allowed, runtime, finest, widest)
            wait = math.inf if expected is None else expected[0] - self.now
            assignment, why = self.reclaim(gang, Claim(profile, allowed, end, finest, widest), wait)
            if why is not None:
                declined.append(("reclaiming", why))
        if assignment is None and self.blocked == 0 and self.may_preempt(gang):
            if expected is None:
                expected = self.earliest_start(gang, profile, allowed, runtime, finest, widest)
            start = math.inf if expected is None else expected[0]
            if start > self.now:
                assignment, why = self.preempt(gang, Claim(profile, allowed, end, finest, widest), start)
                if why is not None:
                    declined.append(("preempting", why))
        if assignment is not None:
            self.bind(gang, profile, assignment, end)
            return True
        if fresh:
            # Probe the class's shortest untried gang too: when even its shorter run window fails,
            # every gang of the class fails, and the pass may stop before trying them.
            failed = runtime
            shortest = self.untried_runtime(key)
            if (
                shortest is not None
                and shortest < runtime
                and cluster.place(profile, allowed, (self.now, self.now + shortest), finest, widest) is None
            ):
                failed = shortest
            cached = (failed, self.capacity_reason(gang, profile, allowed, finest, widest))
            self.failure_cache[key] = cached
        decisions.reasons[gang.name] = cached[1]
        self.blocked += 1
        if self.reservations_made < self.depth:
            self.reservations_made += 1
            if expected is None:
                expected = self.earliest_start(gang, profile, allowed, runtime, finest, widest)
            self.reserve(gang, profile, runtime, expected)
        for action, why in declined:
            decisions.reasons[gang.name] = reasons.declined(decisions.reasons[gang.name], action, why)
        return False

    def borrows(self, queue: str, profile: GangProfile) -> bool:
        """``usage.borrows`` for the gang's admission charge, cached per queue and charge while the
        cluster version (which every change of usage bumps) stays the same."""
        key = (queue, profile.admission_key)
        cached = self.borrow_cache.get(key)
        if cached is not None and cached[0] == self.version:
            return cached[1]
        result = self.usage.borrows(queue, profile.admission)
        self.borrow_cache[key] = (self.version, result)
        return result

    def bind(self, gang: Gang, profile: GangProfile, assignment: Assignment, end: float) -> None:
        """Start the gang as placed. An optional member (beyond ``min_member``) that would take the
        queue past a limit is left out; the gang borrows when what it holds exceeds a quota."""
        cluster = self.cluster
        queue = gang.queue
        placement = {}
        charge: dict[str, int] = {}
        for position, (member, index) in enumerate(assignment):
            requests = profile.member_requests[member]
            if (
                position >= gang.required_members
                and self.queue_limited(queue)
                and self.usage.over_limit(queue, add_resources(dict(charge), requests)) is not None
            ):
                continue
            cluster.adjust(index, requests, -1)
            add_resources(charge, requests)
            placement[member] = cluster.nodes[index].name
            self.bound_releases.append((end, index, requests))
        borrowed = self.usage.borrows(queue, charge)
        self.usage.add(queue, charge)
        self.version += 1
        passed = self.first_reservation.gang_name if self.first_reservation is not None else None
        bind = Bind(gang.name, placement, borrowed, passed)
        self.decisions.binds.append(bind)
        self.bound_ends.append((bind, end))

    def unfit(self, gang: Gang, profile: GangProfile, allowed: Acceptance | None, finest: int, widest: int) -> bool:
        """True when the gang does not fit even the empty cluster (more GPUs than the nodes it may
        use hold, say). Such a gang holds nobody up: it takes no reservation, reclaims nothing and
        does not stop a strict order; its reason, kept for its placement class, says what it lacks."""
        if self.cluster.fits_when_empty(profile, allowed, finest, widest):
            return False
        return self.refuse(profile.failure_key, self.unfit_reason(gang, profile, allowed, widest))

    def unknown_level(self, gang: Gang, key: int) -> bool:
        """True when the gang requires a topology level the scheduler has no name for (a typo, or
        other ``topology_level_names``): it cannot be honoured, so the gang is refused as unfit."""
        constraint = gang.topology
        if constraint is None or not constraint.required or constraint.level in self.level_names:
            return False
        return self.refuse(key, reasons.unknown_level(constraint.level, self.level_names))

    def refuse(self, key: int, reason: str) -> bool:
        """Mark the placement class as one that never starts (see ``unfit``), with its reason."""
        self.unfit_keys.add(key)
        self.failure_cache[key] = (0.0, reason)  # fails for every run time: the class closes
        return True

    def unfit_reason(self, gang: Gang, profile: GangProfile, allowed: Acceptance | None, widest: int) -> str:
        """What the gang lacks on the empty cluster: GPUs on the nodes it may use (naming the rules
        that rule nodes out) or in its widest domain; room for the pods of one shape, for one
        resource; else its pods' requests together."""
        cluster = self.cluster
        usable = [node for index, node in enumerate(cluster.nodes) if allowed is None or allowed[index]]
        capacity = [
            node.allocatable.get(GPU, 0) if allowed is None or allowed[index] else 0
            for index, node in enumerate(cluster.nodes)
        ]
        need = profile.required_gpu
        if need > sum(capacity):
            return reasons.unfit_total(need, sum(capacity), self.excluded(gang, profile) if allowed is not None else "")
        if widest >= 0:
            domains = cluster.levels[widest].members.values()
            best = max((sum(capacity[index] for index in members) for members in domains), default=0)
            if need > best:
                return reasons.unfit_domain(need, self.level_names[widest], best)
        requested: set[str] = set()
        for shape in profile.required_shapes:
            for name, each in ((GPU, shape.gpu), *shape.others):
                if each:
                    requested.add(name)
                    room = sum(node.allocatable.get(name, 0) // each for node in usable)
                    if room < len(shape.member_names):
                        return reasons.unfit_pods(len(shape.member_names), name, each, room)
        return reasons.unfit_requests(sorted(requested))

    def excluded(self, gang: Gang, profile: GangProfile) -> str:
        """How many schedulable nodes each of the gang's node rules keeps it off."""
        counts = self.cluster.broken_rule_counts(gang, profile)
        return reasons.excluded([(self.rule_text(gang, rule), count) for rule, count in counts.items() if count])

    @staticmethod
    def rule_text(gang: Gang, rule: str) -> str:
        if rule == NODE_RULES[0]:
            return "its node selector " + ",".join(
                f"{key}={value}" for key, value in sorted(gang.node_selector.items())
            )
        if rule == NODE_RULES[1]:
            terms = (" ".join((req.key, req.operator, ",".join(req.values))).strip() for req in gang.affinity)
            return f"its node affinity ({'; '.join(terms)})"
        return "a taint it does not tolerate"

    def capacity_reason(
        self, gang: Gang, profile: GangProfile, allowed: Acceptance | None, finest: int, widest: int
    ) -> str:
        """Why the gang cannot start now, the first that holds of: too few free GPUs in its widest
        domain, in the cluster or on the nodes it may use; a reservation holds what it would fit
        in; a resource its pods find too little of, in all or node by node; the pods' requests
        are not free together on the same nodes."""
        cluster = self.cluster
        need = profile.required_gpu
        free_gpu = cluster.free_gpu if allowed is None else self.allowed_free(profile, allowed)[0]
        if widest >= 0:
            level = cluster.levels[widest]
            if allowed is None:
                best = level.best_free()
            else:
                best = max((sum(free_gpu[index] for index in members) for members in level.members.values()), default=0)
            if need > best:
                return reasons.within_domain(need, self.level_names[widest], best)
        if need > cluster.total_free_gpu:
            return reasons.cluster_short(GPU, need, cluster.total_free_gpu)
        if allowed is not None and need > sum(free_gpu):
            return reasons.no_matching_nodes(need, sum(free_gpu), self.excluded(gang, profile))
        if self.decisions.reservations and cluster.place(profile, allowed, (self.now, self.now), finest, widest):
            blocking = self.blocking_reservation(profile, allowed, finest, widest)
            return reasons.behind_reservation(blocking.gang_name, blocking.start - self.now)
        return self.requests_reason(profile, allowed, free_gpu)

    def blocking_reservation(
        self, profile: GangProfile, allowed: Acceptance | None, finest: int, widest: int
    ) -> Reservation:
        """The reservation, soonest first, whose start the gang (which fits free capacity now)
        cannot run past: it fits until that start, and not once that reservation begins."""
        ordered = sorted(self.decisions.reservations, key=operator.attrgetter("start"))
        for reservation in ordered:
            until = math.nextafter(reservation.start, math.inf)  # a window that overlaps the reservation
            if self.cluster.place(profile, allowed, (self.now, until), finest, widest) is None:
                return reservation
        return ordered[-1]

    def allowed_free(self, profile: GangProfile, allowed: Acceptance) -> tuple[list[int], list[dict[str, int]]]:
        """The free GPUs of every node, 0 where the gang may not go, and the free resources of the
        nodes it may use; kept per node filter while the cluster stays the same."""
        cached = self.allowed_views.get(profile.filter_key)
        if cached is None or cached[0] != self.version:
            cluster = self.cluster
            free_gpu = [gpus if ok else 0 for gpus, ok in zip(cluster.free_gpu, allowed, strict=True)]
            free = [node_free for node_free, ok in zip(cluster.free, allowed, strict=True) if ok]
            cached = self.allowed_views[profile.filter_key] = (self.version, free_gpu, free)
        return cached[1], cached[2]

    def requests_reason(self, profile: GangProfile, allowed: Acceptance | None, free_gpu: list[int]) -> str:
        """The gang's GPUs are free in number but it does not fit: name the request it finds too
        little of (in all, then node by node for one shape of pod), else fragmentation."""
        free = self.cluster.free if allowed is None else self.allowed_free(profile, allowed)[1]
        needed: dict[str, int] = {}
        for shape in profile.required_shapes:
            for name, amount in shape.others:
                needed[name] = needed.get(name, 0) + amount * len(shape.member_names)
        for name, amount in sorted(needed.items()):
            if not reaches((node_free.get(name, 0) for node_free in free), amount):
                return reasons.cluster_short(name, amount, sum(node_free.get(name, 0) for node_free in free))
        for shape in profile.required_shapes:
            count = len(shape.member_names)
            histogram = self.cluster.gpu_histogram if allowed is None else Counter(free_gpu)
            if shape.gpu and sum(nodes * (gpus // shape.gpu) for gpus, nodes in histogram.items()) < count:
                return reasons.fragmented(profile.required_gpu, shape.gpu, max(free_gpu, default=0))
            for name, amount in shape.others:
                if not reaches((node_free.get(name, 0) // amount for node_free in free), count):
                    room = sum(node_free.get(name, 0) // amount for node_free in free)
                    most = max((node_free.get(name, 0) for node_free in free), default=0)
                    return reasons.pods_short(count, name, amount, room, most)
        largest = profile.required_shapes[0].gpu if profile.required_shapes else 0
        return reasons.requests_apart(profile.required_gpu, largest)

    # -- reclaim -------------------------------------------------------------------------------

    def reclaim(self, gang: Gang, claim: Claim, wait: float) -> tuple[Assignment | None, str | None]:
        """Evict whole borrowed gangs of other queues (lowest priority, least progress first) until
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
        own_path = set(self.tree.path(gang.queue))
        usage = self.usage
        budget = self.eviction_budget(claim.profile, wait)
        claimed = quota_ratio(usage.gpus(gang.queue) + claim.profile.gpu, self.tree.quota(gang.queue).get(GPU, 0))
        over_quota: dict[str, bool] = {}
        left: dict[str, int] = {}  # victim queue -> GPUs it would hold after the victims so far
        victims = []
        too_costly = better_served = False  # some borrower was spared for the cost bound / ratio rule
        for r in self.reclaimable:
            victim_queue = r.gang.queue
            if r.gang.name in self.evicted or victim_queue in own_path:
                continue
            over = over_quota.get(victim_queue)
            if over is None:
                over = over_quota[victim_queue] = usage.over_quota(victim_queue)
            if not over:
                continue
            after = left.get(victim_queue, usage.gpus(victim_queue)) - self.memo.placed_by_node(r)[2].get(GPU, 0)
            lost = self.lost_work(r)
            if lost > budget:
                too_costly = True
            elif quota_ratio(after, self.tree.quota(victim_queue).get(GPU, 0)) < claimed:
                better_served = True
            else:
                left[victim_queue] = after
                budget -= lost
                victims.append(r)
        reason = f"reclaimed by queue {gang.queue} (within its quota) for gang {gang.name}"
        spared = "cost" if too_costly else "served" if better_served else None
        return self.evict_for(claim, victims, reason, "reclaim", spared)

    def preempt(self, gang: Gang, claim: Claim, start: float) -> tuple[Assignment | None, str | None]:
        """Evict gangs of the gang's own queue that started past its reservation (``preempt_backfill``)
        when it could then start now instead of at ``start``; victims as for reclaim (lowest priority,
        least progress first, past their minimum runtime), their lost work bounded in the same way.
        Returns what ``reclaim`` returns.

        Only gangs whose estimated end is no later than ``start`` are taken: the gangs that, as their
        estimates promised, would be gone by then. A gang that backfilled onto other nodes for a
        longer run holds nothing the reservation was promised."""
        budget = self.eviction_budget(claim.profile, start - self.now)
        candidates = sorted(
            (
                running
                for running in self.running_index.backfilled.get(gang.name, {}).values()
                if running.gang.queue == gang.queue
                and running.expected_end <= start
                and running.gang.name not in self.evicted
                and self.may_reclaim(running)
            ),
            key=self.victim_order,
        )
        victims = []
        too_costly = False
        for running in candidates:
            lost = self.lost_work(running)
            if lost <= budget:
                budget -= lost
                victims.append(running)
            else:
                too_costly = True
        reason = f"preempted for gang {gang.name}, whose reservation it started past: that gang can start now"
        return self.evict_for(claim, victims, reason, "preempt", "cost" if too_costly else None)

    def evict_for(
        self, claim: Claim, victims: list[RunningGang], reason: str, cause: EvictCause, spared: str | None
    ) -> tuple[Assignment | None, str | None]:
        """Place the gang by evicting the fewest of ``victims`` (taken in their order). When it
        would not fit even with all of them gone, evict nothing and say why (a ``reasons.DECLINED``
        key): ``spared``, why the caller left some candidates out, if it did; else "room"."""
        cluster = self.cluster
        need = claim.profile.required_gpu
        declined = spared or ("room" if victims else None)

        def place() -> Assignment | None:
            return cluster.place(claim.profile, claim.allowed, (self.now, claim.end), claim.finest, claim.widest)

        if cluster.total_free_gpu + sum(self.memo.placed_by_node(r)[2].get(GPU, 0) for r in victims) < need:
            return None, declined  # even evicting every victim would not free enough GPUs
        released: list[RunningGang] = []
        assignment = None
        for victim in victims:
            self.release(victim, +1)
            released.append(victim)
            if cluster.total_free_gpu >= need:
                assignment = place()
                if assignment is not None:
                    break
        if assignment is None:
            for victim in released:
                self.release(victim, -1)
            return None, declined
        # Victims were released in victim order, wherever they ran: spare every one the gang can
        # do without, trying the ones that have run longest first.
        needed: list[RunningGang] = []
        for victim in reversed(released):
            self.release(victim, -1)
            without = place()
            if without is None:
                self.release(victim, +1)
                needed.append(victim)
            else:
                assignment = without
        for victim in reversed(needed):
            self.evicted.add(victim.gang.name)
            self.usage.add(victim.gang.queue, self.memo.placed_by_node(victim)[2], -1)
            self.decisions.evictions.append(Evict(victim.gang.name, reason, cause))
        self.failure_cache.clear()  # capacity grew: every class with untried gangs may fit again
        self.open_classes = {key for key in self.classes if self.untried_runtime(key) is not None}
        self.version += 1
        return assignment, None

    def release(self, running: RunningGang, sign: int) -> None:
        cluster = self.cluster
        for node, requests in self.memo.placed_by_node(running)[1]:
            index = cluster.index.get(node)
            if index is not None:
                cluster.adjust(index, requests, sign)

    # -- reservations --------------------------------------------------------------------------

    def releases(self) -> Iterator[tuple[float, int, Resources | None]]:
        """(time, node index, requests) of everything running or bound ending then, and (time, -1,
        None) for every reservation's end, soonest first; produced lazily, so finding an early start
        does not pay for ordering every running gang."""
        index = self.cluster.index
        evicted = self.evicted

        def running() -> Iterator[tuple[float, int, Resources]]:
            for gang in self.running_index.by_end:
                if evicted and gang.gang.name in evicted:
                    continue
                for node, requests in self.memo.placed_by_node(gang)[1]:
                    node_index = index.get(node)
                    if node_index is not None:
                        yield gang.expected_end, node_index, requests

        return heapq.merge(
            running(),
            sorted(self.bound_releases, key=_TIME),
            ((end, -1, None) for end in sorted(self.cluster.reservation_ends())),
            key=_TIME,
        )

    def promised_assignment(self, gang_name: str, profile: GangProfile) -> Assignment | None:
        """Where the gang's reservation in the previous decisions (``Snapshot.reservations``) put
        its members; None without one, or when one of its nodes is gone or its members changed."""
        promise = self.promised.get(gang_name)
        if promise is None or not promise.placement:
            return None
        index = self.cluster.index
        members = profile.member_requests
        if any(node not in index or member not in members for member, node in promise.placement):
            return None
        placed = {member for member, _ in promise.placement}
        if any(member not in placed for shape in profile.required_shapes for member in shape.member_names):
            return None
        return [(member, index[node]) for member, node in promise.placement]

    def earliest_start(
        self,
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
        promise = self.promised.get(gang.name)
        promised = self.promised_assignment(gang.name, profile)
        pristine = self.version == 0
        if pristine:
            objects = (self.cluster.nodes, profile, allowed)
            values = (runtime, finest, widest, promise)
            memo = self.running_index.start_memo
            if memo is not None and memo[1] == values and all(map(operator.is_, memo[0], objects)):
                return self._started(memo[2])
        promised_start = (promise.start, promised) if promise is not None and promised else None
        found = self._first_fit(profile, allowed, runtime, finest, widest, promised_start)
        if pristine:
            self.running_index.start_memo = (objects, values, found)
        return self._started(found)

    def _started(self, found: Start | None) -> Start | None:
        return None if found is None else (max(found[0], self.now), found[1])

    def _first_fit(
        self,
        profile: GangProfile,
        allowed: Acceptance | None,
        runtime: float,
        finest: int,
        widest: int,
        promised: Start | None,
    ) -> Start | None:
        """(release time, assignment) for ``earliest_start``; ``promised``: the previous
        reservation's start and assignment, taken at its time if it holds then."""
        future = FutureWalk(self.cluster)
        # Candidate start times: whenever running gangs end or earlier reservations expire.
        for when, released in itertools.groupby(self.releases(), key=_TIME):
            if math.isinf(when):
                break
            for _, node_index, requests in released:
                if requests is not None:
                    future.release(node_index, requests)
            start = max(when, self.now)
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
        self,
        gang: Gang,
        profile: GangProfile,
        runtime: float,
        expected: Start | None,
    ) -> None:
        """Hold what the gang needs from its earliest start (``earliest_start``) for its run."""
        if expected is None:
            self.decisions.reasons[gang.name] = reasons.no_start_time()
            return
        start, assignment = expected
        holds = node_loads(profile, assignment)
        indexes = sorted(holds)
        self.cluster.reserve(holds, start, start + runtime)
        self.version += 1
        names = tuple(self.cluster.nodes[i].name for i in indexes)
        held = tuple(
            (self.cluster.nodes[i].name, tuple(sorted((k, v) for k, v in holds[i].items() if v))) for i in indexes
        )
        placement = tuple(sorted((member, self.cluster.nodes[i].name) for member, i in assignment))
        reservation = Reservation(gang.name, names, start, held, placement)
        self.decisions.reservations.append(reservation)
        self.first_reservation = self.first_reservation or reservation
        waits_for = self.holding_up(set(names), start)
        self.decisions.reasons[gang.name] = reasons.reserved(
            start - self.now, list(names), self.domain(indexes), waits_for
        )

    def holding_up(self, nodes: set[str], start: float) -> list[str]:
        """The gangs, running or started in this pass, that hold some of ``nodes`` until no later
        than ``start``: what a reservation there waits for, soonest ending first."""
        ending = [
            (running.expected_end, running.gang.name, self.memo.placed_by_node(running)[0])
            for running in itertools.takewhile(lambda r: r.expected_end <= start, self.running_index.by_end)
            if running.gang.name not in self.evicted
        ]
        ending += [
            (end, bind.gang_name, tuple(bind.placement.values())) for bind, end in self.bound_ends if end <= start
        ]
        return [name for end, name, used in sorted(ending) if end <= start and nodes.intersection(used)]

    def domain(self, indexes: list[int]) -> str | None:
        """The finest topology domain of several nodes that holds all these nodes, as 'level name'."""
        for level in reversed(self.cluster.levels):
            domains = {level.node_domain[index] for index in indexes}
            if len(domains) == 1:
                domain = domains.pop()
                if len(level.members[domain]) > 1:
                    return f"{level.name} {domain[-1]}"
        return None
