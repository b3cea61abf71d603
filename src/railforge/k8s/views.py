"""What the adapter knows and did, for readers in other threads: a ``/metrics`` endpoint, a dashboard, tests.

The adapter replaces the whole view after each pass under a lock (``publish``) and never changes a published view's
parts; readers take ``view()``, a consistent view they may keep, sharing those parts with each other: they read them
and change nothing. Counters only grow.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

RECENT_DECISIONS = 500

log = logging.getLogger("railforge.decisions")


@dataclass
class QueueView:
    name: str
    parent: str | None
    quota: dict[str, int]
    limit: dict[str, int]
    over_quota_weight: float
    allocated: dict[str, int] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)  # what its waiting gangs request
    usage: float = 0.0  # decayed GPU-seconds (fair share's memory)


@dataclass
class PendingView:
    gang: str
    queue: str
    pods: int
    gpus: int
    submitted: float
    reason: str
    reserved_start: float | None = None  # when the gang holds a reservation
    reserved_nodes: tuple[str, ...] = ()
    expected_start: float | None = None  # its reservation's start, or the plan's for the gangs behind (none: unknown)


@dataclass
class RunningView:
    gang: str
    queue: str
    placement: dict[str, str]  # pod -> node
    gpus: int
    member_gpus: dict[str, int]  # pod -> the GPUs it requests (an MPI launcher asks none)
    started: float
    borrowed: bool
    backfilled_past: str | None


@dataclass
class Decision:
    at: float
    kind: str  # bind, evict, restart, fail, release, complete; defer and blocked (held back by the write side)
    gang: str
    detail: str
    queue: str = ""
    nodes: tuple[str, ...] = ()


@dataclass
class StateView:
    leader: bool = False
    leader_identity: str = ""  # the replica holding the lease, as this replica last read it
    synced: bool = False
    updated: float = 0.0
    queues: list[QueueView] = field(default_factory=list)
    pending: list[PendingView] = field(default_factory=list)
    running: list[RunningView] = field(default_factory=list)
    nodes: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> allocatable
    topology: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node -> path
    problems: list[str] = field(default_factory=list)
    recent: list[Decision] = field(default_factory=list)
    counters: dict[str, float] = field(default_factory=dict)
    last_decide_seconds: float = 0.0


class SchedulerState:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._view = StateView()
        self._recent: deque[Decision] = deque(maxlen=RECENT_DECISIONS)
        self._counters: dict[str, float] = {}

    def view(self) -> StateView:
        with self._lock:  # not a deep copy: at thousands of gangs that took 0.1-0.2 s a scrape
            return dataclasses.replace(self._view, recent=list(self._recent), counters=dict(self._counters))

    def publish(self, view: StateView) -> None:
        """Replace the pass's view; who leads stays as ``set_leader`` last put it."""
        view.updated = time.time()
        with self._lock:
            view.leader_identity = self._view.leader_identity
            self._view = view

    def set_leader(self, leader: bool, synced: bool, identity: str = "") -> None:
        with self._lock:
            self._view.leader, self._view.synced, self._view.leader_identity = leader, synced, identity

    def record(self, kind: str, gang: str, detail: str, queue: str = "", nodes: Iterable[str] = ()) -> None:
        """Keep a decision carried out (the dashboard's recent list) and log it: one INFO line each."""
        decision = Decision(time.time(), kind, gang, str(detail), queue, tuple(sorted(set(nodes))))
        log.info("%s gang=%s queue=%s nodes=%s: %s", kind, gang, queue or "-", ",".join(decision.nodes) or "-", detail)
        with self._lock:
            self._recent.append(decision)

    def count(self, name: str, amount: float = 1) -> None:
        with self._lock:
            self._counters[name] = self._counters.get(name, 0) + amount
