"""The arena's metrics from pods' transitions (railforge.bench.arena), on hand-made observations: a gang bound whole,
one partly bound for a while, one never started; the same jobs through the simulator; the Job a Kueue contender
submits."""

import math

import pytest

from railforge.bench.arena import (
    ARENA_JOB,
    Contender,
    Job,
    Observation,
    PodTimes,
    job_body,
    job_results,
    percentile,
    simulated,
    summary,
)
from railforge.k8s.settings import settings_from_mapping
from railforge.scheduler import GPU
from railforge.testbed.kueue import QUEUE_LABEL
from railforge.testbed.kwok import FAKE_NODE_LABEL, RUNTIME_ANNOTATION

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


def test_a_kueue_contenders_job_is_one_suspended_job_of_all_its_pods_in_its_local_queue():
    kueue = Contender("Kueue", "default-scheduler", None, queue="arena")
    body = job_body(Job("t0001", 3, 8, 42.5), kueue, "test-image")
    assert body["metadata"] == {"name": "t0001", "labels": {QUEUE_LABEL: "arena"}}
    spec = body["spec"]
    assert spec["suspend"] is True and spec["parallelism"] == spec["completions"] == 3
    template = spec["template"]
    assert "name" not in template["metadata"]  # the Job controller names the pods
    assert template["metadata"]["labels"] == {ARENA_JOB: "t0001"}
    assert template["metadata"]["annotations"] == {RUNTIME_ANNOTATION: "42.5s"}
    assert template["spec"]["schedulerName"] == "default-scheduler"
    assert template["spec"]["containers"][0]["resources"]["requests"] == {GPU: "8"}


def node(name: str, leaf: str) -> dict:
    labels = {FAKE_NODE_LABEL: "fake", "railforge.io/leaf": leaf, "railforge.io/spine": "spine-0"}
    ready = [{"type": "Ready", "status": "True"}]
    status = {"allocatable": {GPU: "8", "cpu": "128", "memory": "2Ti"}, "conditions": ready}
    return {"metadata": {"name": name, "labels": labels}, "spec": {}, "status": status}


def test_the_simulator_runs_the_same_jobs_on_the_same_nodes_as_an_observation_summary_reads():
    jobs = [Job("pool", 2, 8, 10), Job("next", 1, 4, 5, submit=1), Job("huge", 3, 8, 5, submit=2)]
    nodes = [node("fake-0", "leaf-0"), node("fake-1", "leaf-0")]
    observation = simulated(jobs, nodes, settings_from_mapping({}))
    times = observation.pods
    assert times["pool-0"].bound == times["pool-1"].bound == 0 and times["pool-0"].ended == 10
    assert times["next-0"].bound == 10 and times["next-0"].ended == 15  # waited for the whole pool
    assert times["huge-0"].bound is None and times["huge-0"].phase == "Pending"  # larger than the cluster
    metrics = summary(jobs, observation, capacity_gpus=16)
    assert metrics["completed"] == 2 and metrics["never_started"] == 1 and metrics["makespan_s"] == 15
    assert metrics["mean_completion_s"] == (10 + 14) / 2
