"""The arena's metrics from pods' transitions (railforge.bench.arena), on hand-made observations: a gang bound whole,
one partly bound for a while, one never started."""

import math

import pytest

from railforge.bench.arena import Job, Observation, PodTimes, job_results, percentile, summary

JOBS = [Job("whole", 2, 8, 10), Job("split", 2, 8, 10, submit=1), Job("never", 1, 8, 10, submit=2)]


def observed() -> Observation:
    observation = Observation(started=0)
    observation.pods = {
        "whole-0": PodTimes("whole", bound=0.5, running=1, ended=11, phase="Succeeded"),
        "whole-1": PodTimes("whole", bound=0.6, running=1, ended=11, phase="Succeeded"),
        # one pod bound at 2, its partner only at 12 (after whole ended): partly bound for 10 s
        "split-0": PodTimes("split", bound=2, running=2.5, ended=22.5, phase="Succeeded"),
        "split-1": PodTimes("split", bound=12, running=12.5, ended=22.5, phase="Succeeded"),
        "never-0": PodTimes("never"),
    }
    return observation


def test_job_results_time_each_job_from_its_submission():
    results = {result.name: result for result in job_results(JOBS, observed(), horizon=30)}
    assert results["whole"].wait == pytest.approx(0.6) and results["whole"].completion == 11
    assert results["whole"].partial == pytest.approx(0.1)  # the two binds 0.1 s apart
    assert results["split"].wait == 11 and results["split"].completion == 21.5
    assert results["split"].partial == 10
    assert results["never"].wait is None and results["never"].completion is None and results["never"].partial == 0


def test_summary_counts_partly_bound_gangs_and_uses_the_gpus_over_the_makespan():
    metrics = summary(JOBS, observed(), capacity_gpus=16)
    assert metrics["completed"] == 2 and metrics["never_started"] == 1
    assert metrics["makespan_s"] == 22.5
    assert metrics["mean_completion_s"] == pytest.approx((11 + 21.5) / 2)
    assert metrics["p99_wait_big_s"] == 11  # both 16-GPU jobs waited; the longer wait
    # whole's two binds 0.1 s apart are one decision; split waited 10 s half bound
    assert metrics["gangs_partly_bound"] == 1 and metrics["partly_bound_s"] == pytest.approx(10)
    # 8 GPUs x (10 + 10 + 20 + 10) s over 16 GPUs x 22.5 s
    assert metrics["gpu_utilisation"] == pytest.approx(8 * 50 / (16 * 22.5))


def test_percentile_is_the_nearest_rank():
    assert percentile([3, 1, 2], 0.5) == 2 and percentile([1, 2, 3, 4], 0.99) == 4
    assert math.isnan(percentile([], 0.99))
