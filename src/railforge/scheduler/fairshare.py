"""Hierarchical queues, quota/limit accounting and water-filling fair shares (in GPUs)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from railforge.scheduler.model import GPU, Queue, Resources, add_resources


class QueueTree:
    """Queues by name with their ancestor paths. A running gang's queue that is not declared (one
    removed while it ran) is accounted as a root queue with no quota; pending gangs of such a queue
    do not start (``PendingIndex``). The declared hierarchy itself must be sound: a queue declared
    twice, a parent not declared (a typo would lift the subtree out of its parent's limit) or a
    cycle of parents raises ``ValueError``."""

    def __init__(self, queues: Iterable[Queue]):
        self.queues: dict[str, Queue] = {}
        for queue in sorted(queues, key=lambda q: q.name):
            if queue.name in self.queues:
                raise ValueError(f"queues: {queue.name!r} is declared twice; expected one Queue per name")
            self.queues[queue.name] = queue
        # with no quota anywhere nothing is guaranteed, so nothing is borrowed (nobody could reclaim it)
        self.any_quota = any(queue.quota for queue in self.queues.values())
        self._paths: dict[str, tuple[str, ...]] = {}
        self._quotas: dict[str, dict[str, int]] = {}
        for queue in self.queues.values():
            if queue.parent is not None and queue.parent not in self.queues:
                raise ValueError(
                    f"queues: {queue.name!r} names parent {queue.parent!r}, which is not declared; "
                    "expected a declared queue or None"
                )
            path = self.path(queue.name)
            root = self.queues[path[-1]].parent
            if root is not None:
                cycle = " -> ".join((*path, root))
                raise ValueError(f"queues: parents form a cycle ({cycle}); expected a tree")

    def get(self, name: str) -> Queue:
        queue = self.queues.get(name)
        if queue is None:
            queue = self.queues[name] = Queue(name)
        return queue

    def path(self, name: str) -> tuple[str, ...]:
        """The queue and its ancestors, leaf first."""
        path = self._paths.get(name)
        if path is None:
            chain = [name]
            parent = self.get(name).parent
            while parent is not None and parent not in chain:
                chain.append(parent)
                parent = self.get(parent).parent
            path = self._paths[name] = tuple(chain)
        return path

    def quota(self, name: str) -> Resources:
        """The queue's guarantee: what it names, and for each resource it does not name that its
        children do, their guarantees summed (a parent that only groups teams guarantees what they
        are guaranteed, rather than nothing, which would make every gang below it a borrower)."""
        if not self._quotas:
            children = self.children()

            def settle(queue: str) -> dict[str, int]:
                summed: dict[str, int] = {}
                for child in children.get(queue, []):
                    add_resources(summed, settle(child))
                quota = self._quotas[queue] = {**summed, **self.queues[queue].quota}
                return quota

            for root in children.get(None, []):
                settle(root)
        quota = self._quotas.get(name)
        return quota if quota is not None else self.get(name).quota  # a root registered since

    def children(self) -> dict[str | None, list[str]]:
        """Parent name (None for roots) -> child names, sorted."""
        tree: dict[str | None, list[str]] = {}
        for name in sorted(self.queues):
            parent = self.queues[name].parent
            tree.setdefault(parent if parent in self.queues else None, []).append(name)
        return tree


class Usage:
    """Resources held per queue, counted on the queue and every ancestor."""

    def __init__(self, tree: QueueTree):
        self.tree = tree
        self.used: dict[str, dict[str, int]] = {}

    def add(self, queue: str, resources: Resources, sign: int = 1) -> None:
        for name in self.tree.path(queue):
            add_resources(self.used.setdefault(name, {}), resources, sign)

    def gpus(self, queue: str) -> int:
        return self.used.get(queue, {}).get(GPU, 0)

    def over_limit(self, queue: str, charge: Resources) -> tuple[str, str, int] | None:
        """First (queue, resource, limit) the charge would exceed, checking leaf to root."""
        for name in self.tree.path(queue):
            limit = self.tree.get(name).limit
            used = self.used.get(name, {})
            for resource in sorted(limit):
                if charge.get(resource, 0) and used.get(resource, 0) + charge[resource] > limit[resource]:
                    return name, resource, limit[resource]
        return None

    def borrows(self, queue: str, charge: Resources) -> bool:
        """True when the charge takes the queue or an ancestor beyond its quota. Quotas cover GPUs
        (missing means 0) and the other resources they name; where no queue declares one, nothing borrows."""
        if not self.tree.any_quota:
            return False
        for name in self.tree.path(queue):
            quota = self.tree.quota(name)
            used = self.used.get(name, {})
            for resource in _quota_resources(quota):
                amount = charge.get(resource, 0)
                if amount and used.get(resource, 0) + amount > quota.get(resource, 0):
                    return True
        return False

    def over_quota(self, queue: str) -> bool:
        quota = self.tree.quota(queue)
        used = self.used.get(queue, {})
        return any(used.get(resource, 0) > quota.get(resource, 0) for resource in _quota_resources(quota))


def _quota_resources(quota: Resources) -> list[str]:
    return sorted({GPU, *quota})


def usage_added(gpus: float, seconds: float, half_life: float) -> float:
    """What holding ``gpus`` for ``seconds`` adds to a queue's usage decayed with ``half_life``,
    in mean GPUs over time (usage x ln 2 / half-life): ``gpus`` x (1 - 2^(-seconds/half-life)),
    all of them for a run without end."""
    return gpus * (1 - 0.5 ** (seconds / half_life))


def water_fill(
    capacity: float, demand: Mapping[str, float], quota: Mapping[str, float], weight: Mapping[str, float]
) -> dict[str, float]:
    """Split ``capacity``: each gets min(demand, quota) first (scaled down if quotas exceed the
    capacity), then the rest goes to those with unmet demand in proportion to their weight."""
    names = sorted(demand)
    guaranteed = {n: min(demand[n], quota.get(n, 0.0)) for n in names}
    total_guaranteed = sum(guaranteed.values())
    if total_guaranteed >= capacity:
        scale = capacity / total_guaranteed if total_guaranteed else 0.0
        return {n: guaranteed[n] * scale for n in names}
    share = dict(guaranteed)
    remaining = capacity - total_guaranteed
    active = [n for n in names if demand[n] > share[n] and weight.get(n, 1.0) > 0]
    while remaining > 1e-9 and active:
        total_weight = sum(weight.get(n, 1.0) for n in active)
        saturated = [n for n in active if demand[n] - share[n] <= remaining * weight.get(n, 1.0) / total_weight]
        if not saturated:
            for n in active:
                share[n] += remaining * weight.get(n, 1.0) / total_weight
            break
        for n in saturated:
            remaining -= demand[n] - share[n]
            share[n] = demand[n]
        active = [n for n in active if n not in saturated]
    return share


def fair_shares(tree: QueueTree, leaf_demand: Mapping[str, float], capacity: float) -> dict[str, float]:
    """GPU fair share of every queue: water-filling at the roots, then within each parent's share.

    ``leaf_demand`` is the GPUs each queue's own gangs hold or wait for; a queue's demand is that of
    its subtree, capped by its GPU limit.
    """
    for name in sorted(leaf_demand):
        tree.get(name)  # register queues known only from their gangs
    children = tree.children()
    demand: dict[str, float] = {}

    def subtree_demand(name: str) -> float:
        total = leaf_demand.get(name, 0.0) + sum(subtree_demand(c) for c in children.get(name, []))
        limit = tree.get(name).limit.get(GPU, math.inf)
        demand[name] = min(total, limit)
        return demand[name]

    for root in children.get(None, []):
        subtree_demand(root)

    shares: dict[str, float] = {}

    def divide(parent: str | None, available: float) -> None:
        kids = children.get(parent, [])
        if not kids:
            return
        split = water_fill(
            available,
            {k: demand[k] for k in kids},
            {k: float(tree.quota(k).get(GPU, 0)) for k in kids},
            {k: tree.get(k).over_quota_weight for k in kids},
        )
        for kid in kids:
            shares[kid] = split[kid]
            divide(kid, split[kid])

    divide(None, capacity)
    return shares
