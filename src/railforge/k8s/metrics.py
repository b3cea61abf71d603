"""The scheduler's Prometheus metrics (docs/scheduler.md, "Metrics", maps them to KAI's and Kueue's).

Queue and gang gauges are read from the adapter's published state when scraped, so they always describe the last
pass; counters and histograms are fed by the adapter as it acts (``bound``, ``removed``, ``decided``,
``reasons``). Each adapter has its own registry: several adapters in one process (tests) never mix.
"""

from __future__ import annotations

import time
from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import generate_latest

from railforge.scheduler import CPU, GPU, Queue
from railforge.scheduler.fairshare import QueueTree, fair_shares

# created -> every pod bound: seconds for an empty cluster, hours or a day behind a reservation
GANG_LATENCY_BUCKETS = (0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 86400)
DECIDE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def base_unit(resource: str, amount: float) -> float:
    """A core amount in Prometheus' base unit: CPU millicores as cores; bytes and counts stay."""
    return amount / 1000 if resource == CPU else amount


def fair_share_gpus(view) -> dict[str, float]:
    """Each queue's GPU fair share now: the core's water-filling of the selected nodes' GPUs over what each
    queue holds and waits for (quota first, the rest by over-quota weight, within each parent's share)."""
    queues = [Queue(q.name, q.parent, q.quota, q.limit, q.over_quota_weight) for q in view.queues]
    demand = {q.name: float(q.allocated.get(GPU, 0) + q.pending.get(GPU, 0)) for q in view.queues}
    capacity = float(sum(allocatable.get(GPU, 0) for allocatable in view.nodes.values()))
    try:
        return fair_shares(QueueTree(queues), demand, capacity)
    except ValueError:  # not a tree: the translation refuses such queues, so this view has none to share
        return {}


class _StateCollector:
    """Gauges (and the adapter's own counters) from the state published after each pass."""

    def __init__(self, state):
        self.state = state

    def describe(self):
        return []  # collected on scrape only: the queues and resources are known then

    def collect(self):
        view = self.state.view()
        labels = ["queue", "resource"]
        families = {
            "quota": GaugeMetricFamily(
                "railforge_queue_quota", "Guaranteed amount per queue and resource.", None, labels
            ),
            "limit": GaugeMetricFamily("railforge_queue_limit", "Hard cap per queue and resource.", None, labels),
            "allocated": GaugeMetricFamily(
                "railforge_queue_allocated", "Amount held by the queue's bound gangs.", None, labels
            ),
            "pending": GaugeMetricFamily(
                "railforge_queue_pending", "Amount requested by the queue's waiting gangs.", None, labels
            ),
        }
        for queue in view.queues:
            for key, family in families.items():
                amounts = getattr(queue, key)
                for resource in sorted(set(amounts) | ({GPU} if key in ("allocated", "pending") else set())):
                    family.add_metric([queue.name, resource], base_unit(resource, amounts.get(resource, 0)))
        yield from families.values()
        share = GaugeMetricFamily(
            "railforge_queue_fair_share", "The queue's fair share now (GPUs).", None, ["queue", "resource"]
        )
        for name, gpus in sorted(fair_share_gpus(view).items()):
            share.add_metric([name, GPU], gpus)
        yield share
        usage = GaugeMetricFamily(
            "railforge_queue_usage_gpu_seconds", "Decayed GPU-seconds: fair share's memory.", None, ["queue"]
        )
        for queue in view.queues:
            usage.add_metric([queue.name], queue.usage)
        yield usage
        pending = GaugeMetricFamily(
            "railforge_pending_gangs", "Gangs waiting, by queue and reason code.", None, ["queue", "reason"]
        )
        for (queue, code), count in sorted(Tally((p.queue, _code(p.reason)) for p in view.pending).items()):
            pending.add_metric([queue, code], count)
        yield pending
        waits = GaugeMetricFamily(
            "railforge_queue_expected_wait_seconds",
            "Longest time from the last pass to the expected start of one of the queue's waiting gangs.",
            None,
            ["queue"],
        )
        longest: dict[str, float] = {}
        for gang in view.pending:
            if gang.expected_start is not None:
                wait = max(0.0, gang.expected_start - view.updated)
                longest[gang.queue] = max(wait, longest.get(gang.queue, 0.0))
        for queue, wait in sorted(longest.items()):
            waits.add_metric([queue], wait)
        yield waits
        running = GaugeMetricFamily("railforge_running_gangs", "Gangs bound, by queue.", None, ["queue"])
        for queue, count in sorted(Tally(r.queue for r in view.running).items()):
            running.add_metric([queue], count)
        yield running
        yield GaugeMetricFamily("railforge_leader", "1 while this replica leads and acts.", value=int(view.leader))
        yield GaugeMetricFamily(
            "railforge_last_pass_timestamp_seconds", "When the last pass published its state.", value=view.updated
        )
        yield CounterMetricFamily(
            "railforge_pass_errors", "Scheduling passes that failed.", value=view.counters.get("pass_errors", 0)
        )


def _code(reason: str) -> str:
    return str(getattr(reason, "code", "")) or "none"


class SchedulerMetrics:
    def __init__(self, state):
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_StateCollector(state))
        self.binds = Counter("railforge_binds", "Pods bound, by queue.", ["queue"], registry=self.registry)
        self.bind_errors = Counter(
            "railforge_bind_errors", "Binding calls the API server refused.", ["queue"], registry=self.registry
        )
        self.evictions = Counter(
            "railforge_evicted_gangs",
            "Gangs whose pods were removed, by reason: reclaim, preemption, restart, fail, release.",
            ["reason"],
            registry=self.registry,
        )
        self.reason_counts = Counter(
            "railforge_gang_reasons",
            "Times a waiting gang was given a reason code it did not have in the pass before.",
            ["code"],
            registry=self.registry,
        )
        self.gang_latency = Histogram(
            "railforge_gang_scheduling_latency_seconds",
            "From the PodGroup's (or lone pod's) creation to every pod of the gang bound.",
            ["queue"],
            buckets=GANG_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.decide_duration = Histogram(
            "railforge_decide_duration_seconds",
            "Time of one decide() call of the core.",
            buckets=DECIDE_BUCKETS,
            registry=self.registry,
        )
        self.pass_duration = Histogram(
            "railforge_pass_duration_seconds",
            "Time of one scheduling pass: translating the caches, decide(), the writes and the reports.",
            buckets=DECIDE_BUCKETS,
            registry=self.registry,
        )
        self._last_codes: dict[str, str] = {}

    def decided(self, seconds: float) -> None:
        self.decide_duration.observe(seconds)

    def passed(self, seconds: float) -> None:
        self.pass_duration.observe(seconds)

    def bound(self, queue: str, submitted: float, pods_bound: int, pods: int) -> None:
        """A gang's binding calls have returned: ``pods_bound`` of its ``pods`` succeeded."""
        self.binds.labels(queue).inc(pods_bound)
        if pods_bound < pods:
            self.bind_errors.labels(queue).inc(pods - pods_bound)
        else:
            self.gang_latency.labels(queue).observe(max(0.0, time.time() - submitted))

    def removed(self, reason: str) -> None:
        self.evictions.labels(reason).inc()

    def reasons(self, codes: dict[str, str]) -> None:
        """The reason code of every gang that waits after a pass (gang -> code)."""
        for gang, code in codes.items():
            if code and self._last_codes.get(gang) != code:
                self.reason_counts.labels(code).inc()
        self._last_codes = dict(codes)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
