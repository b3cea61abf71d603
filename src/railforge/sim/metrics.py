"""Metrics over a finished simulation run.

Definitions (all times in seconds of simulated time):

* JCT (job completion time) = end - submit.
* Queueing delay = JCT - runtime, i.e. all the time a job spent not making progress that survived:
  waiting before its first start, plus any run that was lost to an eviction or restart, plus the
  wait after it.  Without evictions/restarts it is simply first start - submit.
* Size buckets by requested GPUs: ``1``, ``2-8`` (one node) and ``16+`` (anything above 8 GPUs,
  i.e. every multi-node gang; Philly's seven 12-GPU jobs land here too).
* GPU utilisation = time-weighted allocated GPUs / total GPUs over the trace's arrival window
  (first to last submission), integrated exactly between events.  Allocated includes runs later
  lost to restarts.  ``util_makespan`` is the same over first arrival to last completion, from the
  state series (sampled after every ``decide()``, so with a scheduling period it runs slightly
  high: a completion shows up at the next cycle).
* Per-queue share: GPU-seconds a queue received vs the GPU-seconds its fair share entitled it to over
  the arrival window. The fair share is the scheduler's own (``fairshare.fair_shares``: each queue
  min(demand, quota), the rest by over-quota weight), recomputed from the queues' demand after every
  scheduling pass. The Jain index is taken over those ratios of all queues with a non-zero
  entitlement.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

BUCKETS = ("1", "2-8", "16+")


def size_bucket(gpus: int) -> str:
    if gpus <= 1:
        return "1"
    if gpus <= 8:
        return "2-8"
    return "16+"


@dataclass(slots=True)
class JobOutcome:
    job_id: str
    queue: str
    gpus: int
    submit: float
    duration: float
    first_start: float | None = None
    end: float | None = None
    starts: int = 0
    evictions: int = 0
    restarts: int = 0
    failed: bool = False

    @property
    def jct(self) -> float | None:
        return None if self.end is None else self.end - self.submit

    @property
    def queueing_delay(self) -> float | None:
        return None if self.end is None else self.end - self.submit - self.duration


@dataclass(slots=True)
class SimResult:
    trace: str
    policy: str
    estimates: str
    total_gpus: int
    jobs: list[JobOutcome]
    window: tuple[float, float]
    # (time, allocated GPUs, pending gangs, running gangs) at every point the state changed
    series: list[tuple[float, int, int, int]] = field(default_factory=list)
    queue_alloc: dict[str, float] = field(default_factory=dict)
    queue_fair: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    unfinished: dict[str, str] = field(default_factory=dict)  # gang still pending at the end -> reason


def _known(values: Iterable[float | None]) -> list[float]:
    """The values of finished jobs (a job's JCT and queueing delay are None until it ends)."""
    return [value for value in values if value is not None]


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0, **dict.fromkeys(("mean", "median", "p95", "p99", "max"), math.nan)}
    a = np.asarray(values, dtype=float)
    return {
        "n": len(values),
        "mean": float(a.mean()),
        "median": float(np.percentile(a, 50)),
        "p95": float(np.percentile(a, 95)),
        "p99": float(np.percentile(a, 99)),
        "max": float(a.max()),
    }


def time_weighted_mean(series: list[tuple[float, int, int, int]], start: float, end: float, col: int = 1):
    """Mean of a right-continuous step function (value holds from its time to the next) on [start, end]."""
    if end <= start or not series:
        return math.nan
    total = 0.0
    for i, row in enumerate(series):
        t0 = max(row[0], start)
        t1 = series[i + 1][0] if i + 1 < len(series) else end
        t1 = min(t1, end)
        if t1 > t0:
            total += row[col] * (t1 - t0)
    return total / (end - start)


def jain_index(values: list[float]) -> float:
    if not values:
        return math.nan
    s = sum(values)
    sq = sum(v * v for v in values)
    return (s * s) / (len(values) * sq) if sq > 0 else math.nan


def _window_util(res: SimResult, lost: bool = False) -> float:
    """Exact: the simulator integrates each queue's allocated GPUs over the arrival window. With
    ``lost``, less the GPU-time within the window of runs later cut short (their work is redone)."""
    span = res.window[1] - res.window[0]
    if span <= 0 or not res.total_gpus:
        return math.nan
    allocated = sum(res.queue_alloc.values())
    if lost:
        allocated -= res.counters.get("lost_window_gpu_seconds", 0.0)
    return allocated / (res.total_gpus * span)


def summarise(res: SimResult) -> dict:
    done = [j for j in res.jobs if j.end is not None and not j.failed]
    jct = _known(j.jct for j in done)
    wait = _known(j.queueing_delay for j in done)
    by_bucket: dict[str, dict[str, dict[str, float]]] = {}
    for b in BUCKETS:
        sel = [j for j in done if size_bucket(j.gpus) == b]
        by_bucket[b] = {
            "jct": _stats(_known(j.jct for j in sel)),
            "wait": _stats(_known(j.queueing_delay for j in sel)),
        }
    first = min((j.submit for j in res.jobs), default=0.0)
    makespan_end = max((j.end for j in res.jobs if j.end is not None), default=first)
    ratios = {q: res.queue_alloc.get(q, 0.0) / f for q, f in res.queue_fair.items() if f > 0}
    longest = max(done, key=lambda j: j.queueing_delay or 0.0, default=None)
    return {
        "trace": res.trace,
        "policy": res.policy,
        "estimates": res.estimates,
        "jobs": len(res.jobs),
        "completed": len(done),
        "failed": sum(1 for j in res.jobs if j.failed),
        "unfinished": sum(1 for j in res.jobs if j.end is None),
        "unfinished_reasons": dict(Counter(res.unfinished.values()).most_common()),
        "jct": _stats(jct),
        "wait": _stats(wait),
        "by_bucket": by_bucket,
        "makespan": makespan_end - first,
        "util": _window_util(res),
        "util_useful": _window_util(res, lost=True),
        "util_makespan": time_weighted_mean(res.series, first, makespan_end) / res.total_gpus,
        "queue_ratio": ratios,
        "queue_fair_gpu_h": {q: f / 3600 for q, f in res.queue_fair.items() if f > 0},
        "jain": jain_index(list(ratios.values())),
        "longest_wait": longest.queueing_delay if longest else math.nan,
        "longest_wait_job": longest.job_id if longest else None,
        "counters": dict(res.counters),
    }
