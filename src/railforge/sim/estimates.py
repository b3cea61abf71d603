"""Runtime estimates (a gang's ``max_runtime``) for jobs whose traces carry none.

``exact``: the estimate is the job's real runtime (an oracle user).

``user``: a seeded model of how people fill in a wall-time limit.  For every job, independently and
reproducibly (the RNG is seeded with ``seed`` and the job id, so the order of jobs does not matter):

* with probability ``P_LIMIT`` (0.2) the user just asks for the queue's limit, ``LIMIT`` (7 days);
* otherwise the user over-estimates by a factor U, log-uniform on [1, 10] (median about 3.2x), and
  the request is rounded up to a whole hour and capped at ``LIMIT``.

Users never under-estimate: every trace job ran to completion, so a job longer than the limit gets
its own runtime rounded up to the hour (as if an exception was granted).  A generic-CSV trace that
carries ``max_runtime`` uses that value instead (floored at the real runtime for the same reason).
"""

from __future__ import annotations

import math
import random

from railforge.sim.traces import JobRecord

HOUR = 3600.0
LIMIT = 7 * 24 * HOUR
P_LIMIT = 0.2
MODELS = ("exact", "user")


def ceil_hour(seconds: float) -> float:
    return math.ceil(seconds / HOUR) * HOUR


def estimate(job: JobRecord, model: str, seed: int = 2017) -> float:
    runtime = float(math.ceil(job.duration))
    if model == "exact":
        return runtime
    if model != "user":
        raise ValueError(f"unknown estimate model {model!r}: use one of {', '.join(MODELS)}")
    if job.user_estimate is not None:
        return max(float(job.user_estimate), runtime)
    if runtime > LIMIT:
        return ceil_hour(runtime)
    rng = random.Random(f"{seed}:{job.job_id}")
    if rng.random() < P_LIMIT:
        return LIMIT
    factor = 10.0 ** rng.random()
    return min(ceil_hour(runtime * factor), LIMIT)
