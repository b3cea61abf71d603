"""Order: the order in which a cycle tries the waiting gangs.

Gangs waiting longer than ``aging_bound`` come first, oldest first. The rest follow the configured
order: ``fair`` repeatedly serves the queue furthest below its fair share (``fairshare``), as if
each gang taken were started and ran its estimate, within a queue by priority then age; ``fifo``
merges the queues' lists by priority then age; ``sjf_oracle`` takes the shortest true run time
first. Orders are produced lazily, so a pass that stops early does not pay for ordering gangs it
never tries. Once every reservation is made, the rest can only backfill and are tried shortest
estimate first (``backfill_order``); under ``over_share_last`` the gangs of the queues ahead of their
fair share after the others' (``over_share``).
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping

from railforge.scheduler.cycle import CycleState
from railforge.scheduler.fairshare import fair_shares, usage_added
from railforge.scheduler.incremental import PendingIndex, queue_order_key
from railforge.scheduler.model import GPU, Gang

LN2 = math.log(2)
_SUBMIT_TIME = operator.attrgetter("submit_time")


def service_order(state: CycleState, index: PendingIndex, capacity: int) -> Iterable[Gang]:
    """Gangs in service order; the fair order is produced lazily, so a pass that stops early
    (see ``run``) does not pay for ordering the gangs it never tries."""
    config = state.config
    by_age = index.by_age
    cutoff = -math.inf if config.aging_bound is None else state.now - config.aging_bound
    aged = by_age[: bisect_right(by_age, cutoff, key=_SUBMIT_TIME)]  # served first, oldest first
    rest: Iterable[Gang]
    if config.order == "fifo":  # the queues' lists merged: a strict order stops at its head
        rest = heapq.merge(*index.by_queue.values(), key=queue_order_key)
        if aged:
            rest = (gang for gang in rest if gang.submit_time > cutoff)
    elif config.order == "sjf_oracle":
        rest = sorted(by_age[len(aged) :], key=lambda g: (oracle_runtime(state, g), g.submit_time, g.name))
    else:
        rest = fair_order(state, index, aged, cutoff, capacity)
    return itertools.chain(aged, rest)


def oracle_runtime(state: CycleState, gang: Gang) -> float:
    return gang.oracle_runtime if gang.oracle_runtime is not None else state.runtime(gang)


def fair_order(
    state: CycleState, index: PendingIndex, aged: list[Gang], cutoff: float, capacity: int
) -> Iterator[Gang]:
    """Repeatedly serve the queue whose service is furthest below its fair share, as if each
    gang taken were started; within a queue: priority, then age. The ``aged`` gangs (served
    before this order) are left out, their demand too."""
    by_queue = index.by_queue
    demand: dict[str, float] = dict(index.demand)
    aged_count: dict[str, int] = {}
    for gang in aged:
        aged_count[gang.queue] = aged_count.get(gang.queue, 0) + 1
        demand[gang.queue] -= state.memo.profile(gang).gpu
    served = [queue for queue in by_queue if aged_count.get(queue, 0) < len(by_queue[queue])]
    for queue in aged_count.keys() - served:
        del demand[queue]  # every gang it has waiting is aged
    for queue, charge in state.running_index.by_queue.items():
        demand[queue] = demand.get(queue, 0) + charge.get(GPU, 0)
    shares = fair_shares(state.tree, demand, capacity)
    half_life = state.config.fair_share_half_life
    usage = state.snapshot.usage

    def next_position(queued: list[Gang], position: int) -> int:
        while aged and position < len(queued) and queued[position].submit_time <= cutoff:
            position += 1
        return position

    # Served, in GPUs: with a half-life, the queue's decayed usage as a mean over time, plus what its
    # running gangs will add to it by their expected ends and what each gang taken adds by its own
    # (``usage_added``); without one, the GPUs it holds. A queue is keyed by (served / share, served,
    # -priority, name). Counting what a gang will add, rather than the GPUs held now, keeps a queue
    # that could start only small gangs from being served as though it held its share.
    heap = []
    constants: dict[str, tuple[float, int]] = {}
    allocated: dict[str, float] = {}
    decays = half_life > 0
    committed: dict[str, float] = {}
    if decays:
        for running in state.snapshot.running:
            left = max(running.expected_end - state.now, 0.0)
            added = usage_added(state.gpus(running), left, half_life)
            committed[running.gang.queue] = committed.get(running.gang.queue, 0.0) + added
    for queue in served:
        share = shares.get(queue, 0.0)
        priority = -state.tree.get(queue).priority
        constants[queue] = (share, priority)
        if decays:
            load = allocated[queue] = usage.get(queue, 0.0) * LN2 / half_life + committed.get(queue, 0.0)
        else:
            load = allocated[queue] = state.usage.gpus(queue)
        position = next_position(by_queue[queue], 0)
        heap.append(((load / share if share > 0 else math.inf, load, priority, queue), queue, position))
    if state.config.backfill_order == "over_share_last":
        state.backfill_last = over_share(state, {queue: (allocated[queue], constants[queue][0]) for queue in served})
    heapq.heapify(heap)
    replace, pop = heapq.heapreplace, heapq.heappop
    while heap:
        _, queue, position = heap[0]
        queued = by_queue[queue]
        gang = queued[position]
        yield gang
        gpus = state.memo.profile(gang).gpu
        load = allocated[queue] = allocated[queue] + (
            usage_added(gpus, state.runtime(gang), half_life) if decays else gpus
        )
        position = next_position(queued, position + 1)
        if position < len(queued):
            share, priority = constants[queue]
            ratio = load / share if share > 0 else math.inf
            replace(heap, ((ratio, load, priority, queue), queue, position))
        else:
            pop(heap)


def over_share(state: CycleState, served: Mapping[str, tuple[float, float]]) -> frozenset[str]:
    """Of the waiting queues (name -> (served, fair share), both in GPUs as the fair order counts them), those whose
    gangs backfill after the others': served faster than the waiting queues together, and holding at least their
    fair share now. Shortest estimate first alone hands the holes that only small gangs fit to the queue with the most
    small gangs waiting, the one served least often in the fair order: the lightest, which so stays over its share
    (docs/scheduler-core.md, "Fair share order")."""
    total_share = sum(share for _, share in served.values())
    if total_share <= 0:
        return frozenset()
    rate = sum(load for load, _ in served.values()) / total_share
    return frozenset(
        queue for queue, (load, share) in served.items() if load > rate * share and state.usage.gpus(queue) >= share
    )


def backfill_order(state: CycleState) -> Iterator[Gang]:
    """The untried gangs, shortest estimate first; under ``backfill_order: over_share_last`` the gangs of the queues
    in ``state.backfill_last`` after all others (``over_share``)."""
    last = state.backfill_last
    if last:
        yield from _shortest_first(state, lambda gang: gang.queue not in last)
    yield from _shortest_first(state, None)


def _shortest_first(state: CycleState, admits: Callable[[Gang], bool] | None) -> Iterator[Gang]:
    """The untried gangs that ``admits`` takes (None: every one), shortest estimate first: the classes' sorted lists
    merged, with one heap entry per class. A closed class's gangs are not tried: each would fail as the class
    did (no reclaim reopens it once every reservation is made), so they get their reasons as
    untried gangs; unless a queue has a limit, which could give one another reason at its turn.
    """
    classes, cursor, tried = state.classes, state.cursor, state.tried
    skip_closed = state.shortcuts and not any(queue.limit for queue in state.snapshot.queues)
    untried_runtime = state.untried_runtime  # state.open_classes may be replaced (reclaim): read it anew

    def head(key: int, start: int) -> int | None:
        """The position of the class's first untried gang from ``start`` on that ``admits`` takes; None: none."""
        if admits is None:
            return None if untried_runtime(key) is None else cursor[key]
        members = classes[key]
        while start < len(members) and (members[start][2].name in tried or not admits(members[start][2])):
            start += 1
        return start if start < len(members) else None

    # (run time, queue order, key, position): the class entry flattened, so that the heap compares one tuple
    # instead of two nested; the queue order names the gang, so no two entries tie
    heap = []
    for key in classes:
        position = head(key, cursor[key])
        if position is not None:
            runtime, order, _ = classes[key][position]
            heap.append((runtime, order, key, position))
    heapq.heapify(heap)
    while heap:
        _, _, key, position = heap[0]
        yield classes[key][position][2]
        position = None if skip_closed and key not in state.open_classes else head(key, position + 1)
        if position is None:
            heapq.heappop(heap)
        else:
            runtime, order, _ = classes[key][position]
            heapq.heapreplace(heap, (runtime, order, key, position))
