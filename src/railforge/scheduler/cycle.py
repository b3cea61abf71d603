"""The state of one scheduling cycle, handed from stage to stage.

A ``CycleState`` is made per ``Scheduler.decide`` call and dropped after it. It holds the snapshot,
the decisions being built, the free-capacity view (``cluster``, built by the recover stage and
changed by every bind, eviction and reservation), the queue usage, and the bookkeeping with which
the pass stops early: the placement classes' failures, cursors and open set. The stages
(``stages.recover`` -> ``admit`` -> ``order`` -> ``allocate`` -> ``reserve`` / ``reclaim`` ->
``explain``, driven by ``core.run_cycle``) are functions of this state; what it answers itself
are small questions about the snapshot and the running gangs that several stages ask.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from railforge.scheduler.fairshare import QueueTree, Usage
from railforge.scheduler.incremental import ClassEntry, PendingIndex, RunningIndex, queue_order_key
from railforge.scheduler.memo import Memo
from railforge.scheduler.model import GPU, Bind, Decisions, Gang, Reason, Reservation, RunningGang, Snapshot
from railforge.scheduler.placement import Cluster, GangProfile

if TYPE_CHECKING:  # the stages import this module
    from railforge.scheduler.stages.explain import FreeView


class CycleState:
    """What one decide() call knows and has decided so far."""

    cluster: Cluster  # set by the recover stage

    def __init__(
        self,
        snapshot: Snapshot,
        memo: Memo,
        pending_index: PendingIndex,
        running_index: RunningIndex,
        shortcuts: bool = True,
    ):
        """``memo`` and the indexes come from the ``Scheduler`` (kept between its calls).
        ``shortcuts``: stop the pass, or skip a class's gangs, once they cannot change the cluster
        (their reasons are then worked out as those of untried gangs). Off, every waiting gang is
        tried in turn: the tests' reference for what the shortcuts must not change."""
        self.snapshot = snapshot
        self.config = snapshot.config
        self.now = snapshot.now
        self.shortcuts = shortcuts
        self.decisions = Decisions()
        self.tree = QueueTree(snapshot.queues)
        self.usage = Usage(self.tree)
        self.level_names = self.config.topology_level_names
        self.memo = memo
        self.pending_index = pending_index
        self.running_index = running_index
        self.evicted: set[str] = set()
        self.bound_releases: list[tuple[float, int, Mapping[str, int]]] = []
        self.bound_ends: list[tuple[Bind, float]] = []  # the binds of this pass with their expected ends
        self.failure_cache: dict[int, tuple[float, Reason]] = {}  # failure key -> (run time, reason)
        self.unfit_keys: set[int] = set()  # failure keys of gangs that do not fit the empty cluster
        self.reservations_made = 0
        self.depth = {"none": 0, "easy": 1}.get(self.config.backfill, self.config.reservation_depth)
        self.first_reservation: Reservation | None = None
        self.maintenance: list[tuple[float, tuple[str, ...]]] = []  # (from, nodes) soonest first: held from then on
        self.promised = {reservation.gang_name: reservation for reservation in snapshot.reservations}
        self.limited: dict[str, bool] = {}  # queue -> some queue on its path has a limit
        self.version = 0  # bumped whenever binds, evictions or reservations change the cluster
        self.blocked = 0  # gangs blocked on capacity so far; only the first ones may reclaim
        self.borrow_cache: dict[tuple, tuple[int, bool]] = {}  # (queue, charge) -> (version, borrows)
        self.allowed_views: dict[int, tuple[int, FreeView]] = {}  # filter key -> (version, its view)
        self.made_reasons: dict[tuple, Reason] = {}  # (wording function, its arguments) -> the reason (``reason``)
        # Waiting gangs by failure key as (run time, queue order, gang), shortest first (the backfill
        # order; from the PendingIndex), and a cursor past the ones already tried; a key is "open"
        # while one of its untried gangs might still be placed.
        self.classes: dict[int, list[ClassEntry]] = {}
        self.cursor: dict[int, int] = {}
        self.open_classes: set[int] = set()
        self.tried: set[str] = set()
        self.min_gpu = 0  # the fewest GPUs any waiting gang requires
        self.backfill_last: frozenset[str] = frozenset()  # queues whose gangs backfill after the others'

    def reason(self, make: Callable[..., Reason], *args: object) -> Reason:
        """``make(*args)``, made once per cycle: gangs short of the same amount say the same."""
        key = (make, *args)
        made = self.made_reasons.get(key)
        if made is None:
            made = self.made_reasons[key] = make(*args)
        return made

    # -- gangs ---------------------------------------------------------------------------------

    def runtime(self, gang: Gang) -> float:
        if gang.max_runtime is not None:
            return gang.max_runtime
        default = self.tree.get(gang.queue).default_max_runtime
        return math.inf if default is None else default

    def class_record(self, gang: Gang) -> tuple[GangProfile, ClassEntry]:
        """(profile, class entry) of a waiting gang; the entry, (run time, queue order, gang), sorts
        its placement class (the profile's failure key) shortest first."""
        return self.memo.profile(gang), (self.runtime(gang), queue_order_key(gang), gang)

    def levels_for(self, gang: Gang, profile: GangProfile) -> tuple[int, int]:
        """(finest, widest) topology level indexes to try; -1 is the whole cluster."""
        finest = len(self.level_names) - 1
        constraint = gang.topology
        widest = self.domain_level(gang) if constraint is not None and constraint.required else -1
        if profile.required_gpu == 0:
            finest = widest  # CPU-only gangs need no GPU locality
        return finest, widest

    def domain_level(self, gang: Gang) -> int:
        """The index of the level the gang asks to run within (required or preferred); -1 for none."""
        constraint = gang.topology
        if constraint is None or constraint.level not in self.level_names:
            return -1
        return self.level_names.index(constraint.level)

    def queue_limited(self, queue: str) -> bool:
        """Whether some queue on the queue's path has a limit (cached per queue)."""
        limited = self.limited.get(queue)
        if limited is None:
            limited = self.limited[queue] = any(self.tree.get(name).limit for name in self.tree.path(queue))
        return limited

    def untried_runtime(self, key: int) -> float | None:
        """The shortest run time among the class's gangs not tried yet; None when none is left."""
        members = self.classes[key]
        position = self.cursor[key]
        tried = self.tried
        while position < len(members) and members[position][2].name in tried:
            position += 1
        self.cursor[key] = position
        return members[position][0] if position < len(members) else None

    # -- running gangs that may be evicted -----------------------------------------------------

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

    def victim_order(self, running: RunningGang) -> tuple:
        """Evict the lowest priority first, then the least work lost (GPUs x run time so far: a young 8-GPU gang
        may have done more than an older 1-GPU one), then the least progress."""
        return running.gang.priority, self.lost_work(running), self.now - running.start_time, running.gang.name

    def lost_work(self, running: RunningGang) -> float:
        """What evicting the gang destroys: its GPUs x its run time so far."""
        return self.gpus(running) * (self.now - running.start_time)

    def gpus(self, running: RunningGang) -> int:
        return self.memo.placed_by_node(running)[2].get(GPU, 0)

    def eviction_budget(self, profile: GangProfile, wait: float) -> float:
        """The work one claim (reclaim or preemption) may destroy: ``reclaim_cost_limit`` times the
        claimer's GPUs x ``wait``, the time it would wait otherwise."""
        cost_limit = self.config.reclaim_cost_limit
        return math.inf if cost_limit is None else cost_limit * profile.gpu * wait
