"""What a ``Scheduler`` carries from one call to the next: indexes of the pending and running gangs.

A control loop calls ``decide()`` on snapshots that differ little between calls: a few gangs arrive,
start or end. Sorting a thousand pending gangs into placement classes and per-queue order, and
summing what hundreds of running gangs use per node, on every call cost over half of a Philly
replay. ``PendingIndex`` and ``RunningIndex`` keep those results and apply only what changed since
the previous call, matching gangs by object identity (snapshot objects are immutable; an equal
gang in the same place counts as the one held, see ``_Held``). They are caches: whatever they held
before, the result equals that of an index built from scratch, and the tests check that.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Generic, TypeVar

from railforge.scheduler.memo import Memo
from railforge.scheduler.model import Gang, Queue, RunningGang, add_resources
from railforge.scheduler.placement import GangProfile

AGE_ORDER = operator.attrgetter("submit_time", "name")
_QUEUE_ORDER = operator.itemgetter(1)  # of a ClassEntry
T = TypeVar("T")
ClassEntry = tuple[float, tuple, Gang]  # (run time, queue order, gang): a class sorts shortest first
ClassRecord = Callable[[Gang], tuple[GangProfile, ClassEntry]]  # gang -> (its profile, its class entry)


def queue_order_key(gang: Gang) -> tuple:
    """Order within a queue: priority, then age, then name."""
    return -gang.priority, gang.submit_time, gang.name


# Running gangs by expected end (then name, which is unique among them), read in C: a cold start
# sorts every running gang by it.
end_order = operator.attrgetter("expected_end", "gang.name")


def _remove(items: list, item: object, sort_key: Callable | None = None) -> None:
    position = bisect_left(items, item) if sort_key is None else bisect_left(items, sort_key(item), key=sort_key)
    if position == len(items) or items[position] != item:
        raise RuntimeError("gang index out of step with its gangs")
    del items[position]


class PendingIndex:
    """Waiting gangs as placement classes (failure key -> entries, shortest run first), per-queue
    lists in queue order with their GPU demand, and one list by age (submit time, name). Gangs of
    a queue that is not declared are only listed apart (``undeclared``): they may not start."""

    def __init__(self, memo: Memo, queues: tuple[Queue, ...] = (), names: GangNames | None = None):
        self.memo = memo
        self.queues = queues  # run times of gangs without their own limit come from queue defaults
        self.declared = frozenset(queue.name for queue in queues)
        self.names = names
        self.gangs: _Held[Gang] = _Held()
        self._clear()

    def _clear(self) -> None:
        self.classes: dict[int, list[ClassEntry]] = {}
        self.by_queue: dict[str, list[Gang]] = {}
        self.demand: dict[str, int] = {}  # queue -> GPUs its waiting gangs ask for
        self.by_age: list[Gang] = []
        self.required: dict[int, int] = {}  # required GPUs -> number of gangs
        self.timed: dict[int, Gang] = {}  # gangs with a schedule timeout or a restart backoff
        self.undeclared: dict[int, Gang] = {}

    def update(self, gangs: Sequence[Gang], record: ClassRecord) -> PendingIndex:
        """Make the index hold exactly ``gangs``."""
        gone, new = self.gangs.update(gangs)
        if self.names is not None:
            self.names.update([gang.name for gang in gone], [gang.name for gang in new])
        if len(new) > len(self.gangs.items) // 2:  # mostly new (a cold start): sorting once is cheaper
            self._clear()
            self._build(record)
        else:
            for gang in gone:
                self._discard(gang, record)
            for gang in new:
                self._add(gang, record)
        return self

    def _build(self, record: ClassRecord) -> None:
        """``_add`` every gang held, then sort each list once. A queue's gangs are sorted by the
        queue order their class entries hold already."""
        classes, demand, required, timed = self.classes, self.demand, self.required, self.timed
        declared, by_age = self.declared, self.by_age
        queued_entries: dict[str, list[ClassEntry]] = {}
        for gang in self.gangs.items.values():
            queue = gang.queue
            if queue not in declared:
                self.undeclared[id(gang)] = gang
                continue
            profile, entry = record(gang)
            key, required_gpu = profile.failure_key, profile.required_gpu
            members = classes.get(key)
            if members is None:
                classes[key] = [entry]
            else:
                members.append(entry)
            queued = queued_entries.get(queue)
            if queued is None:
                queued = queued_entries[queue] = []
                demand[queue] = 0
            queued.append(entry)
            demand[queue] += profile.gpu
            by_age.append(gang)
            required[required_gpu] = required.get(required_gpu, 0) + 1
            if gang.schedule_timeout is not None or gang.not_before is not None:
                timed[id(gang)] = gang
        for members in classes.values():
            if len(members) > 1:
                members.sort()
        for queue, entries in queued_entries.items():
            entries.sort(key=_QUEUE_ORDER)  # an entry's queue order is queue_order_key(gang)
            self.by_queue[queue] = [entry[2] for entry in entries]
        by_age.sort(key=AGE_ORDER)

    def _add(self, gang: Gang, record: ClassRecord) -> None:
        """Put the gang in every list, in order."""
        if gang.queue not in self.declared:
            self.undeclared[id(gang)] = gang
            return
        profile, entry = record(gang)
        key, required_gpu = profile.failure_key, profile.required_gpu
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
        self.demand[queue] += profile.gpu
        insort(self.by_age, gang, key=AGE_ORDER)
        self.required[required_gpu] = self.required.get(required_gpu, 0) + 1
        if gang.schedule_timeout is not None or gang.not_before is not None:
            self.timed[id(gang)] = gang

    def _discard(self, gang: Gang, record: ClassRecord) -> None:
        if self.undeclared.pop(id(gang), None) is not None:
            return
        profile, entry = record(gang)
        key, required_gpu = profile.failure_key, profile.required_gpu
        members = self.classes[key]
        _remove(members, entry)
        if not members:
            del self.classes[key]
        queue = gang.queue
        queued = self.by_queue[queue]
        _remove(queued, gang, queue_order_key)
        self.demand[queue] -= profile.gpu
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


class RunningIndex:
    """Running gangs: resources used per node, charge per leaf queue, the borrowers, the gangs that
    backfilled past each reservation holder, the gangs by expected end, and whether any has a
    failed member."""

    def __init__(self, memo: Memo, names: GangNames | None = None) -> None:
        self.memo = memo
        self.names = names
        self.running: _Held[RunningGang] = _Held()
        self.by_end: list[RunningGang] = []  # in end_order
        self.used: dict[str, dict[str, int]] = {}
        # node -> a number that changes whenever what is used on the node changes (absent: never used)
        self.use_version: dict[str, int] = {}
        self.node_gangs: dict[str, int] = {}  # node -> running gangs with a member there
        self.by_queue: dict[str, dict[str, int]] = {}
        self.queue_gangs: dict[str, int] = {}
        self.borrowed: dict[int, RunningGang] = {}
        self.backfilled: dict[str, dict[int, RunningGang]] = {}  # gang passed -> gangs that backfilled past it
        self.failed = 0  # gangs with a failed member
        # the last earliest start found in a cluster these gangs alone occupy (reserve.earliest_start)
        self.start_memo: tuple | None = None

    def update(self, running: Sequence[RunningGang]) -> RunningIndex:
        """Make the index hold exactly ``running``."""
        gone, new = self.running.update(running)
        if self.names is not None:
            self.names.update([r.gang.name for r in gone], [r.gang.name for r in new])
        if gone or new:
            self.start_memo = None
        for gang in gone:
            self._change(gang, -1)
        self._add(new)
        if len(new) > len(self.running.items) // 2:  # mostly new (a cold start): sorting once is cheaper
            self.by_end = sorted(self.running.items.values(), key=end_order)
        else:
            for gang in gone:
                _remove(self.by_end, gang, end_order)
            for gang in new:
                insort(self.by_end, gang, key=end_order)
        return self

    def _add(self, new: list[RunningGang]) -> None:
        """``_change(running, +1)`` for each of ``new``, with the lookups done once (a cold start
        adds every running gang)."""
        placed, next_version = self.memo.placed_by_node, self.memo.next_use_version
        used, node_gangs, use_version = self.used, self.node_gangs, self.use_version
        for running in new:
            gang = running.gang
            if len(gang.members) == 1 and len(running.placement) == 1:  # most: read off the one member
                charge = gang.members[0].requests
                (node,) = running.placement.values()
                per_node: Iterable[tuple[str, Mapping[str, int]]] = ((node, charge),)
            else:
                _, per_node, charge = placed(running)
            for node, requests in per_node:
                _count_in(used, node_gangs, node, requests)
                use_version[node] = next_version()
            _count_in(self.by_queue, self.queue_gangs, gang.queue, charge)
            if running.borrowed:
                self.borrowed[id(running)] = running
            passed = running.backfilled_past
            if passed is not None:
                self.backfilled.setdefault(passed, {})[id(running)] = running
            if running.failed_members:
                self.failed += 1

    def _change(self, running: RunningGang, sign: int) -> None:
        _, per_node, charge = self.memo.placed_by_node(running)
        for node, requests in per_node:
            _count(self.used, self.node_gangs, node, requests, sign)
            self.use_version[node] = self.memo.next_use_version()
        _count(self.by_queue, self.queue_gangs, running.gang.queue, charge, sign)
        if running.borrowed:
            if sign > 0:
                self.borrowed[id(running)] = running
            else:
                del self.borrowed[id(running)]
        passed = running.backfilled_past
        if passed is not None:
            gangs = self.backfilled.setdefault(passed, {})
            if sign > 0:
                gangs[id(running)] = running
            else:
                del gangs[id(running)]
                if not gangs:
                    del self.backfilled[passed]
        if running.failed_members:
            self.failed += sign


def _count_in(totals: dict[str, dict[str, int]], counts: dict[str, int], key: str, amounts: Mapping[str, int]) -> None:
    """``_count(..., sign=+1)``, without its checks."""
    counts[key] = counts.get(key, 0) + 1
    total = totals.get(key)
    if total is None:
        totals[key] = dict(amounts)
    else:
        for name, amount in amounts.items():
            total[name] = total.get(name, 0) + amount


def _count(
    totals: dict[str, dict[str, int]], counts: dict[str, int], key: str, amounts: Mapping[str, int], sign: int
) -> None:
    """Add (sign +1) or take away (-1) ``amounts`` under ``key``; a key with no gang left is dropped."""
    count = counts.get(key, 0) + sign
    if count:
        counts[key] = count
        add_resources(totals.setdefault(key, {}), amounts, sign)
    else:
        del counts[key], totals[key]


class GangNames:
    """The gang names a pending and a running index hold together, each with its count, and the
    names held more than once (a snapshot naming two gangs alike, or one gang both pending and
    running, is malformed: decide() refuses it)."""

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.repeated: set[str] = set()

    def update(self, gone: list[str], new: list[str]) -> None:
        count = self.count
        for name in gone:
            left = count.pop(name) - 1
            if left:
                count[name] = left
                if left == 1:
                    self.repeated.discard(name)
        for name in new:
            held = count[name] = count.get(name, 0) + 1
            if held == 2:
                self.repeated.add(name)


class _Held(Generic[T]):
    """The items an index holds, in the order last handed in and by id.

    Snapshots keep their gangs in a stable order between calls (a few leave, a few arrive), so an
    update walks the old and the new order side by side and skips equal runs with tuple compares:
    O(n) work in C and O(changes) in Python. Items are told apart by identity, except that within
    a run an equal item counts as the one held, which stays. Should the order have changed, the
    update compares sets of ids instead."""

    def __init__(self) -> None:
        self.order: tuple[T, ...] = ()
        self.items: dict[int, T] = {}

    def update(self, items: Sequence[T]) -> tuple[list[T], list[T]]:
        """Hold exactly ``items``; returns (the items gone, the items new)."""
        items = tuple(items)
        if items == self.order:
            return [], []
        held = self.items
        walked = _walk(self.order, items, held)
        if walked is None:  # reordered (or repeated) items
            current = dict(zip(map(id, items), items, strict=True))
            gone = [item for key, item in held.items() if key not in current]
            new = [item for key, item in current.items() if key not in held]
            self.order, self.items = items, current
            return gone, new
        self.order, gone, new = walked
        for item in gone:
            del held[id(item)]
        for item in new:
            held[id(item)] = item
        return gone, new


def _walk(old: tuple[T, ...], items: tuple[T, ...], held: dict[int, T]) -> tuple[tuple, list[T], list[T]] | None:
    """(the new order of held items, the items of ``old`` missing from ``items``, the items of
    ``items`` missing from ``old``) when the items both have appear in the same relative order;
    None when they do not (or repeat). A mismatch is an arrival when the new item is not held,
    else a departure of the old one; a reordered item ends up taken for an arrival although it is
    held, which is how the walk notices."""
    order: list[T] = []
    gone: list[T] = []
    new: list[T] = []
    i = j = 0
    while i < len(items) and j < len(old):
        if items[i] is old[j]:
            run = _equal_run(items, i, old, j)
            order += old[j : j + run]
            i += run
            j += run
        elif id(items[i]) in held:
            gone.append(old[j])
            j += 1
        else:
            new.append(items[i])
            order.append(items[i])
            i += 1
    gone += old[j:]
    new += items[i:]
    order += items[i:]
    arrived = set(map(id, new))
    if len(arrived) != len(new) or len(held) - len(gone) + len(new) != len(items) or not arrived.isdisjoint(held):
        return None
    return tuple(order), gone, new


def _equal_run(a: tuple, i: int, b: tuple, j: int) -> int:
    """Length of the longest common run of ``a[i:]`` and ``b[j:]``, given ``a[i] == b[j]``: all
    the rest, or galloping then halving, with slice compares."""
    limit = min(len(a) - i, len(b) - j)
    if a[i + 1 : i + limit] == b[j + 1 : j + limit]:  # often the rest of one list
        return limit
    low, high, step = 1, 1, 1
    while high < limit:
        high = min(low + step, limit)
        if a[i + low : i + high] != b[j + low : j + high]:
            break
        low, step = high, step * 2
    else:
        return low
    while high - low > 1:
        middle = (low + high) // 2
        if a[i + low : i + middle] == b[j + low : j + middle]:
            low = middle
        else:
            high = middle
    return low
