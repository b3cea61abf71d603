"""Trace jobs -> scheduler gangs and queues.

* A job of up to ``gpus_per_node`` GPUs is one member.
* A larger job is ``ceil(gpus / gpus_per_node)`` workers, the GPUs split as evenly as possible
  (12 -> 6 + 6, 24 -> 8 + 8 + 8), plus an MPI launcher member with no GPU: a heterogeneous gang
  whose members are all required.  Multi-node gangs prefer (do not require) one leaf switch.
* Workers request 12 CPU cores and 96 GiB of memory per GPU; the launcher 1 core and 2 GiB; a
  GPU-less job 4 cores and 16 GiB.
* Queues: one per trace queue, quota (GPUs) proportional to its share of the trace's GPU-time,
  rounded by largest remainder so the quotas add up to the cluster (a queue may get 0 and live on
  borrowed capacity).
"""

from __future__ import annotations

import math

from railforge.scheduler.model import CPU, GPU, MEMORY, Gang, Member, Queue, TopologyConstraint
from railforge.sim.estimates import LIMIT, estimate
from railforge.sim.traces import JobRecord, Trace

GIB = 1024**3
CPU_PER_GPU = 12_000
MEM_PER_GPU = 96 * GIB


def split_gpus(gpus: int, per_node: int) -> list[int]:
    if gpus <= per_node:
        return [gpus]
    workers = math.ceil(gpus / per_node)
    base, extra = divmod(gpus, workers)
    return [base + 1 if i < extra else base for i in range(workers)]


def members_for(gpus: int, per_node: int = 8) -> tuple[Member, ...]:
    if gpus <= 0:
        return (Member("main", {CPU: 4000, MEMORY: 16 * GIB}),)
    parts = split_gpus(gpus, per_node)
    workers = tuple(
        Member(f"worker-{i}", {GPU: g, CPU: CPU_PER_GPU * g, MEMORY: MEM_PER_GPU * g}) for i, g in enumerate(parts)
    )
    if len(parts) == 1:
        return workers
    return (Member("launcher", {CPU: 1000, MEMORY: 2 * GIB}), *workers)


def build_gang(job: JobRecord, estimates: str, per_node: int = 8, seed: int = 2017) -> Gang:
    members = members_for(job.gpus, per_node)
    return Gang(
        name=job.job_id,
        queue=job.queue,
        members=members,
        priority=job.priority,
        submit_time=job.submit,
        max_runtime=estimate(job, estimates, seed),
        topology=TopologyConstraint("leaf", required=False) if job.gpus > per_node else None,
        oracle_runtime=float(math.ceil(job.duration)),
    )


def largest_remainder(shares: dict[str, float], total: int) -> dict[str, int]:
    s = sum(shares.values())
    if s <= 0:
        return dict.fromkeys(shares, 0)
    raw = {q: total * v / s for q, v in shares.items()}
    out = {q: math.floor(v) for q, v in raw.items()}
    left = total - sum(out.values())
    for q in sorted(raw, key=lambda q: (-(raw[q] - out[q]), q))[:left]:
        out[q] += 1
    return out


def build_queues(trace: Trace, total_gpus: int) -> list[Queue]:
    """Queues with GPU quotas proportional to their GPU-time shares (over-quota weight 1 each)."""
    share = trace.queue_gpu_time() or {"default": 1.0}
    quotas = largest_remainder(share, total_gpus)
    return [Queue(name=q, quota={GPU: quotas[q]}, default_max_runtime=LIMIT) for q in share]
