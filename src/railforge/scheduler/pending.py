"""The waiting gangs of a pass, kept sorted from one decide() call to the next.

A scheduler calls ``decide()`` on snapshots that differ little between calls: a few gangs arrive,
start or end. Sorting a thousand pending gangs into placement classes and per-queue order on every
call cost about 40 % of a Philly replay. ``PendingIndex`` keeps those orders and applies only what
changed since the previous call, matching gangs by object identity (gangs are immutable). It is a
cache: whatever it held before, the result equals that of an index built from scratch, and a
property test checks that.
"""

from __future__ import annotations

import operator
import threading
from bisect import bisect_left, insort
from collections.abc import Callable, Sequence

from railforge.scheduler.model import Gang, Queue
from railforge.scheduler.placement import gang_profile

AGE_ORDER = operator.attrgetter("submit_time", "name")
ClassEntry = tuple[float, tuple, Gang]  # (run time, queue order, gang): a class sorts shortest first
ClassRecord = Callable[[Gang], tuple[int, int, ClassEntry]]  # gang -> (failure key, required GPUs, entry)


def queue_order_key(gang: Gang) -> tuple:
    """Order within a queue: priority, then age, then name (cached on the Gang)."""
    key = gang.__dict__.get("_queue_order")
    if key is None:
        key = (-gang.priority, gang.submit_time, gang.name)
        object.__setattr__(gang, "_queue_order", key)
    return key


def _remove(items: list, item: object, sort_key: Callable | None = None) -> None:
    position = bisect_left(items, item if sort_key is None else sort_key(item), key=sort_key)
    if position == len(items) or items[position] != item:
        raise AssertionError("pending index out of step with its gangs")
    del items[position]


class PendingIndex:
    """Waiting gangs as placement classes (failure key -> entries, shortest run first), per-queue
    lists in queue order with their GPU demand, and one list by age (submit time, name)."""

    def __init__(self, queues: tuple[Queue, ...] = ()):
        self.queues = queues  # run times of gangs without their own limit come from queue defaults
        self.gangs: dict[int, Gang] = {}
        self.classes: dict[int, list[ClassEntry]] = {}
        self.by_queue: dict[str, list[Gang]] = {}
        self.demand: dict[str, int] = {}  # queue -> GPUs its waiting gangs ask for
        self.by_age: list[Gang] = []
        self.required: dict[int, int] = {}  # required GPUs -> number of gangs
        self.timed: dict[int, Gang] = {}  # gangs with a schedule timeout or a restart backoff

    def update(self, gangs: Sequence[Gang], record: ClassRecord) -> PendingIndex:
        """Make the index hold exactly ``gangs``."""
        current = dict(zip(map(id, gangs), gangs, strict=False))
        previous = self.gangs
        for gone in previous.keys() - current.keys():
            self._discard(previous[gone], record)
        for new in current.keys() - previous.keys():
            self._add(current[new], record)
        self.gangs = current
        return self

    def _add(self, gang: Gang, record: ClassRecord) -> None:
        key, required_gpu, entry = record(gang)
        members = self.classes.get(key)
        if members is None:
            members = self.classes[key] = []
        insort(members, entry)
        queue = gang.queue
        queued = self.by_queue.get(queue)
        if queued is None:
            queued = self.by_queue[queue] = []
            self.demand[queue] = 0
        insort(queued, gang, key=queue_order_key)
        self.demand[queue] += gang_profile(gang).gpu
        insort(self.by_age, gang, key=AGE_ORDER)
        self.required[required_gpu] = self.required.get(required_gpu, 0) + 1
        if gang.schedule_timeout is not None or gang.not_before:
            self.timed[id(gang)] = gang

    def _discard(self, gang: Gang, record: ClassRecord) -> None:
        key, required_gpu, entry = record(gang)
        members = self.classes[key]
        _remove(members, entry)
        if not members:
            del self.classes[key]
        queue = gang.queue
        queued = self.by_queue[queue]
        _remove(queued, gang, queue_order_key)
        self.demand[queue] -= gang_profile(gang).gpu
        if not queued:
            del self.by_queue[queue], self.demand[queue]
        _remove(self.by_age, gang, AGE_ORDER)
        count = self.required[required_gpu] - 1
        if count:
            self.required[required_gpu] = count
        else:
            del self.required[required_gpu]
        self.timed.pop(id(gang), None)

    @property
    def min_required_gpu(self) -> int:
        return min(self.required, default=0)


_local = threading.local()


def cached_index(queues: Sequence[Queue]) -> PendingIndex:
    """This thread's index from the previous call; a fresh one when the queues changed."""
    index = getattr(_local, "index", None)
    if index is None or (index.queues is not queues and index.queues != tuple(queues)):
        index = _local.index = PendingIndex(tuple(queues))
    return index
