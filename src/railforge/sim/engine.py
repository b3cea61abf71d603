"""Discrete-event simulator that drives the scheduler core's ``decide()``.

Events live in a heap ordered by (time, kind, sequence).  All events of one timestamp are applied
first (completions and node repairs before failures before arrivals, so that capacity freed at
``t`` is visible to the gangs arriving at ``t``), then ``decide()`` is called once if anything
changed, and its decisions are applied in the order the core documents: evictions, restarts and
failures (which release capacity), then binds.

* A bound gang completes ``runtime`` seconds later (the trace's duration), regardless of its
  estimate (estimates are never below the runtime, see ``estimates``).
* An evicted (reclaimed) or restarted gang goes back to pending with its original submit time and
  **loses all progress**: its next run takes the full runtime again.  Restarts carry the core's
  ``not_before`` backoff; the simulator wakes the scheduler at that time.
* Optional node failures: a Poisson process, ``failure_rate`` failures per node per day, each on a
  uniformly chosen ready node, which comes back after ``repair_time`` seconds.  Gangs with a member
  on the node get that member listed in ``failed_members`` and cannot complete; the core decides to
  restart or fail them.
* ``period`` > 0 models a scheduler that runs in cycles: events still happen at their own times
  (for the accounting) but ``decide()`` only runs at multiples of ``period``, once for everything
  that happened since the last cycle.  ``period`` = 0 (the default) decides at every event time.
* While gangs are pending the scheduler is also woken every ``resync`` seconds (as a real scheduler
  loop would), so time-based rules (aging, reclaim grace periods, timeouts) can fire between events.
* Between two decide() calls it keeps the host contract (``scheduler.host``) as the Kubernetes adapter does:
  per-queue usage accrued and decayed with the config's half-life, binds turned into running gangs, restarts
  into waiting gangs with their backoff, a gang's GPUs counted one way.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from railforge.scheduler.core import Scheduler
from railforge.scheduler.fairshare import QueueTree, fair_shares
from railforge.scheduler.host import accrue_usage, gang_gpus, restarted, started
from railforge.scheduler.model import (
    GPU,
    Decisions,
    Gang,
    Node,
    Queue,
    Reservation,
    RunningGang,
    SchedulerConfig,
    Snapshot,
)
from railforge.sim.metrics import JobOutcome, SimResult

# event kinds, in the order they are applied within one timestamp
COMPLETE, REPAIR, FAIL, ARRIVE, WAKE = range(5)


@dataclass(frozen=True, slots=True)
class SimJob:
    gang: Gang
    runtime: float


class Simulator:
    def __init__(
        self,
        nodes: Iterable[Node],
        queues: Iterable[Queue],
        jobs: Iterable[SimJob],
        config: SchedulerConfig,
        decide: Callable[[Snapshot], Decisions] | None = None,
        *,
        failure_rate: float = 0.0,
        repair_time: float = 4 * 3600.0,
        resync: float = 900.0,
        period: float = 0.0,
        seed: int = 1,
        progress: Callable[[int], None] | None = None,
        trace: str = "trace",
        policy: str = "policy",
        estimates: str = "exact",
    ) -> None:
        if decide is None:
            decide = Scheduler().decide  # one per run: it carries its indexes between the cycles
        self.decide = decide
        self.config = config
        self.nodes = {n.name: n for n in nodes}
        self.node_tuple = tuple(self.nodes.values())
        self.queues = tuple(queues)
        self.total_gpus = sum(n.allocatable.get(GPU, 0) for n in self.node_tuple)
        self.jobs = {j.gang.name: j for j in jobs}
        self.gpus = {name: gang_gpus(j.gang) for name, j in self.jobs.items()}
        self.queue_tree = QueueTree(self.queues)
        self.failure_rate = failure_rate
        self.repair_time = repair_time
        self.resync = resync
        self.period = period
        self.rng = random.Random(seed)
        self.progress = progress
        self.meta = (trace, policy, estimates)

        self.now = 0.0
        self.heap: list[tuple[float, int, int, object]] = []
        self.seq = 0
        self.pending: dict[str, Gang] = {}
        self.running: dict[str, RunningGang] = {}
        self.run_token: dict[str, int] = {}
        self.outcomes = {
            name: JobOutcome(name, j.gang.queue, self.gpus[name], j.gang.submit_time, j.runtime)
            for name, j in self.jobs.items()
        }
        # sorted: per-queue results come out in one order in every process (a set follows the hash seed)
        qnames = sorted({q.name for q in self.queues} | {j.gang.queue for j in self.jobs.values()})
        self.alloc = dict.fromkeys(qnames, 0)  # GPUs held per queue
        self.pend_gpus = dict.fromkeys(qnames, 0)
        self.usage = dict.fromkeys(qnames, 0.0)
        self.queue_alloc = dict.fromkeys(qnames, 0.0)
        self.queue_fair = dict.fromkeys(qnames, 0.0)
        self.fair_now: dict[str, float] = dict.fromkeys(qnames, 0.0)
        self.fair_demand: dict[str, int] | None = None  # the queues' demand fair_now was computed for
        self.series: list[tuple[float, int, int, int]] = []
        self.remaining = len(self.jobs)
        self.counters: dict[str, float] = {
            "decide_calls": 0,
            "decide_seconds": 0.0,
            "binds": 0,
            "backfills": 0,
            "reclaims": 0,
            "preemptions": 0,
            "restarts": 0,
            "failures": 0,
            "node_failures": 0,
            "lost_gpu_seconds": 0.0,  # GPU-time of runs cut short by evictions and restarts
            "lost_window_gpu_seconds": 0.0,  # the part of it within the arrival window
        }
        submits = [j.gang.submit_time for j in self.jobs.values()]
        self.window = (min(submits, default=0.0), max(submits, default=0.0))
        self.wake_at = math.inf
        self.reservations: tuple[Reservation, ...] = ()  # the last decisions', handed back as a scheduler keeps them

    # -- events ------------------------------------------------------------------------------
    def push(self, t: float, kind: int, payload: object) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, kind, self.seq, payload))

    def _schedule_failure(self) -> None:
        ready = sum(1 for n in self.node_tuple if n.ready)
        if self.failure_rate > 0 and ready:
            rate = self.failure_rate * len(self.node_tuple) / 86400.0
            self.push(self.now + self.rng.expovariate(rate), FAIL, None)

    # -- accounting between events ---------------------------------------------------------
    def _advance(self, t: float) -> None:
        dt = t - self.now
        if dt <= 0:
            return
        self.usage = accrue_usage(self.usage, self.alloc, dt, self.config.fair_share_half_life)
        w0, w1 = self.window
        lo, hi = max(self.now, w0), min(t, w1)
        if hi > lo:
            span = hi - lo
            for q, a in self.alloc.items():
                if a:
                    self.queue_alloc[q] += a * span
            for q, f_share in self.fair_now.items():
                if f_share:
                    self.queue_fair[q] += f_share * span
        self.now = t

    def _refresh_fair(self) -> None:
        demand = {q: self.alloc[q] + self.pend_gpus[q] for q in self.alloc}
        if demand == self.fair_demand:  # a start only moves GPUs from pending to held
            return
        self.fair_demand = demand
        shares = fair_shares(self.queue_tree, demand, self.total_gpus)
        self.fair_now = {q: shares.get(q, 0.0) for q in demand}

    # -- state changes ---------------------------------------------------------------------
    def _add_pending(self, gang: Gang) -> None:
        self.pending[gang.name] = gang
        self.pend_gpus[gang.queue] += self.gpus[gang.name]

    def _release(self, name: str) -> RunningGang:
        rg = self.running.pop(name)
        self.alloc[rg.gang.queue] -= self.gpus[name]
        self.run_token[name] = self.run_token.get(name, 0) + 1
        return rg

    def _interrupt(self, name: str) -> RunningGang:
        """Release a gang whose run is cut short (evicted or restarted); its progress is lost."""
        rg = self._release(name)
        gpus = self.gpus[name]
        self.counters["lost_gpu_seconds"] += gpus * (self.now - rg.start_time)
        first, last = self.window
        self.counters["lost_window_gpu_seconds"] += gpus * max(0.0, min(self.now, last) - max(rg.start_time, first))
        return rg

    def _apply(self, d: Decisions) -> None:
        now = self.now
        for ev in d.evictions:
            if ev.gang_name not in self.running:
                continue
            rg = self._interrupt(ev.gang_name)
            self.outcomes[ev.gang_name].evictions += 1
            self.counters["reclaims" if ev.cause == "reclaim" else "preemptions"] += 1
            self._add_pending(rg.gang)
        for rs in d.restarts:
            if rs.gang_name not in self.running:
                continue
            rg = self._interrupt(rs.gang_name)
            self.outcomes[rs.gang_name].restarts += 1
            self.counters["restarts"] += 1
            self._add_pending(restarted(rg.gang, rs))
            if rs.not_before > now:
                self.push(rs.not_before, WAKE, None)
        for fl in d.failures:
            name = fl.gang_name
            if name in self.running:
                self._release(name)
            elif name in self.pending:
                g = self.pending.pop(name)
                self.pend_gpus[g.queue] -= self.gpus[name]
            else:
                continue
            out = self.outcomes[name]
            out.failed, out.end = True, now
            self.counters["failures"] += 1
            self.remaining -= 1
        for b in d.binds:
            gang = self.pending.pop(b.gang_name, None)
            if gang is None:
                continue
            job = self.jobs[b.gang_name]
            self.pend_gpus[gang.queue] -= self.gpus[gang.name]
            self.alloc[gang.queue] += self.gpus[gang.name]
            self.running[gang.name] = started(
                gang, b.placement, now, borrowed=b.borrowed, backfilled_past=b.backfilled_past
            )
            out = self.outcomes[gang.name]
            if out.first_start is None:
                out.first_start = now
            out.starts += 1
            self.counters["binds"] += 1
            if b.backfilled_past is not None:
                self.counters["backfills"] += 1  # started past a gang holding a reservation
            self.push(now + job.runtime, COMPLETE, (gang.name, self.run_token.get(gang.name, 0)))
        for key, value in d.stats.items():
            if isinstance(value, int | float) and ("backfill" in key or "reclaim" in key):
                self.counters[f"core.{key}"] = self.counters.get(f"core.{key}", 0) + value

    def _handle(self, kind: int, payload) -> bool:
        if kind == ARRIVE:
            self._add_pending(payload)
            return True
        if kind == COMPLETE:
            name, token = payload
            rg = self.running.get(name)
            if rg is None or self.run_token.get(name, 0) != token or rg.failed_members:
                return False
            self._release(name)
            self.outcomes[name].end = self.now
            self.remaining -= 1
            return True
        if kind == FAIL:
            self._schedule_failure()
            ready = [n for n in self.node_tuple if n.ready]
            if not ready:
                return False
            node = self.rng.choice(ready)
            self._set_node(replace(node, ready=False))
            self.counters["node_failures"] += 1
            self.push(self.now + self.repair_time, REPAIR, node.name)
            for name, rg in list(self.running.items()):
                dead = tuple(m for m, n in rg.placement.items() if n == node.name)
                if dead:
                    self.running[name] = replace(rg, failed_members=tuple(sorted({*rg.failed_members, *dead})))
            return True
        if kind == REPAIR:
            self._set_node(replace(self.nodes[payload], ready=True))
            return True
        return kind == WAKE

    def _set_node(self, node: Node) -> None:
        self.nodes[node.name] = node
        self.node_tuple = tuple(self.nodes.values())

    def snapshot(self) -> Snapshot:
        return Snapshot(
            now=self.now,
            nodes=self.node_tuple,
            queues=self.queues,
            pending=tuple(self.pending.values()),
            running=tuple(self.running.values()),
            usage=dict(self.usage),
            config=self.config,
            reservations=self.reservations,
        )

    # -- main loop -------------------------------------------------------------------------
    def run(self) -> SimResult:
        for job in self.jobs.values():
            self.push(job.gang.submit_time, ARRIVE, job.gang)
        if self.heap:
            self.now = self.heap[0][0]
        self._schedule_failure()
        heap = self.heap
        done_reported = 0
        period = self.period
        last: Decisions | None = None
        while self.remaining > 0:
            t_ev = heap[0][0] if heap else math.inf
            tick = bool(self.pending) and self.wake_at <= t_ev
            t = self.wake_at if tick else t_ev
            if t == math.inf:
                break  # nothing will ever happen again: the rest stays unfinished
            if period > 0:
                t = math.ceil(t / period) * period
            changed = tick
            while heap and heap[0][0] <= t:
                t_e, kind, _, payload = heapq.heappop(heap)
                self._advance(t_e)
                changed |= self._handle(kind, payload)
            self._advance(t)
            if changed:
                t0 = time.perf_counter()
                d = last = self.decide(self.snapshot())
                self.counters["decide_seconds"] += time.perf_counter() - t0
                self.counters["decide_calls"] += 1
                self.reservations = tuple(d.reservations)
                self._apply(d)
                self._refresh_fair()
                self.series.append((t, sum(self.alloc.values()), len(self.pending), len(self.running)))
                idle = not (d.binds or d.evictions or d.restarts or d.failures)
                if idle and not heap and not self.running:
                    break  # pending gangs that can never start (e.g. larger than the cluster)
            self.wake_at = t + self.resync if self.pending and self.resync > 0 else math.inf
            done_reported = self._report_progress(done_reported)
        self._report_progress(done_reported)
        trace, policy, estimates = self.meta
        return SimResult(
            trace=trace,
            policy=policy,
            estimates=estimates,
            total_gpus=self.total_gpus,
            jobs=list(self.outcomes.values()),
            window=self.window,
            series=self.series,
            queue_alloc=self.queue_alloc,
            queue_fair=self.queue_fair,
            counters=self.counters,
            # what the scheduler last said about each gang still waiting; "" if it was requeued
            # (evicted or restarted) by the last pass
            unfinished={name: last.reasons.get(name, "") for name in self.pending} if last else {},
        )

    def _report_progress(self, done_reported: int) -> int:
        finished = len(self.jobs) - self.remaining
        if self.progress is not None and finished != done_reported:
            self.progress(finished - done_reported)
        return finished
