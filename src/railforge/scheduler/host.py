"""The host contract: what every caller of ``decide()`` does between two calls.

A caller (the simulator, the Kubernetes adapter) keeps per-queue usage, the GPU-seconds its running gangs held,
decayed with the policy's half-life; it turns each bind into a running gang and each restart into a waiting gang
with its backoff; and it counts a gang's GPUs. Both callers use these functions, so a replay's result is a
result of the production path. Pure: values in, new values out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace

from railforge.scheduler.model import GPU, Gang, Restart, RunningGang


def gang_gpus(gang: Gang) -> int:
    """The GPUs a gang's members request together."""
    return sum(member.requests.get(GPU, 0) for member in gang.members)


def held_gpus(running: Iterable[RunningGang]) -> dict[str, int]:
    """GPUs held per queue by the running gangs."""
    held: dict[str, int] = {}
    for gang in running:
        queue = gang.gang.queue
        held[queue] = held.get(queue, 0) + gang_gpus(gang.gang)
    return held


def accrue_usage(
    usage: Mapping[str, float], held: Mapping[str, int], elapsed: float, half_life: float
) -> dict[str, float]:
    """Usage ``elapsed`` seconds later, while each queue held ``held`` GPUs throughout.

    With a half-life ``h`` > 0 the usage decays continuously: ``u * 2^(-t/h) + a * h/ln2 * (1 - 2^(-t/h))`` for
    ``a`` GPUs held; with ``h <= 0`` nothing decays and ``a * t`` is added.
    """
    if elapsed <= 0:
        return dict(usage)
    if half_life > 0:
        factor = 0.5 ** (elapsed / half_life)
        weight = half_life / math.log(2) * (1 - factor)
    else:
        factor, weight = 1.0, elapsed
    queues = [*usage, *(queue for queue in held if queue not in usage)]
    return {queue: usage.get(queue, 0.0) * factor + held.get(queue, 0) * weight for queue in queues}


def started(
    gang: Gang,
    placement: Mapping[str, str],
    start_time: float,
    *,
    borrowed: bool = False,
    backfilled_past: str | None = None,
    failed_members: tuple[str, ...] = (),
    ending_at: float | None = None,
) -> RunningGang:
    """The running gang a bind made at ``start_time``; it is expected to end after its max runtime, or at
    ``ending_at`` (when sooner) once the host saw some of its members end."""
    end = start_time + gang.max_runtime if gang.max_runtime is not None else math.inf
    if ending_at is not None:
        end = min(end, max(ending_at, start_time))
    return RunningGang(
        gang=gang,
        placement=dict(placement),
        start_time=start_time,
        expected_end=end,
        borrowed=borrowed,
        failed_members=failed_members,
        backfilled_past=backfilled_past,
    )


def restarted(gang: Gang, restart: Restart) -> Gang:
    """The gang waiting again after ``restart``: one more restart counted, not started before its backoff ends."""
    return replace(gang, restart_count=gang.restart_count + 1, not_before=restart.not_before)
