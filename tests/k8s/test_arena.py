"""The arena's smoke test on the real API server: KWOK (built from its pinned module) runs the pods bound to two fake
8-GPU nodes for the time their jobs say and ends them; the same three jobs go to railforge (gangs, as PodGroups), then
to kube-scheduler's defaults (lone pods) and to kube-scheduler with its own gangs (scheduling.k8s.io PodGroups, the
1.36 gates on), each in its own namespace on the same nodes, and each contender's
metrics are computed from the pods' transitions a watch saw. The full arena and its report are a benchmark."""

import json

import pytest
from kubernetes import client

from railforge.bench.arena import Contender, Job, job_results, run, summary
from railforge.k8s.gangapis import NATIVE, SCHEDULER_PLUGINS
from railforge.testbed.build import TEST_IMAGE
from railforge.testbed.controlplane import create_namespace
from railforge.testbed.kwok import EXIT_CODE_ANNOTATION, RUNTIME_ANNOTATION, add_fake_nodes, start_kwok
from railforge.testbed.procs import wait_for

POOL_LABEL = "railforge.test/pool"
POOL = "arena"
JOBS = [
    Job("a", pods=2, gpus=8, runtime=3),  # the whole pool
    Job("b", pods=2, gpus=8, runtime=3, submit=0.2),  # the whole pool again: waits for a
    Job("c", pods=1, gpus=4, runtime=2, submit=0.4),
]


@pytest.fixture(scope="module")
def kwok(control_plane, tmp_path_factory):
    process = start_kwok(control_plane, tmp_path_factory.mktemp("kwok"))
    add_fake_nodes(control_plane, ["arena-n0", "arena-n1"], {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"},
                   labels={POOL_LABEL: POOL})  # fmt: skip
    yield process
    process.stop()
    core = client.CoreV1Api(control_plane.api)
    for name in ("arena-n0", "arena-n1"):
        core.delete_node(name)


def test_kwok_ends_a_pod_with_the_exit_code_it_was_given(control_plane, kwok):
    create_namespace(control_plane, "arena-exit")
    core = client.CoreV1Api(control_plane.api)
    body = {
        "metadata": {"name": "fails", "annotations": {RUNTIME_ANNOTATION: "1s", EXIT_CODE_ANNOTATION: "3"}},
        "spec": {"nodeName": "arena-n0", "containers": [{"name": "main", "image": TEST_IMAGE}]},
    }
    core.create_namespaced_pod("arena-exit", body)

    def ended() -> bool:
        return core.read_namespaced_pod("fails", "arena-exit").status.phase == "Failed"

    wait_for("KWOK to end the pod", ended, 30, [kwok])
    status = core.read_namespaced_pod("fails", "arena-exit").status
    assert status.container_statuses[0].state.terminated.exit_code == 3


def test_railforge_and_kube_scheduler_run_the_same_jobs_and_the_metrics_follow_from_the_pods(
    control_plane, scheduler_crds, kwok, run_scheduler
):
    capacity = 16
    results = {}
    # railforge: each job a gang; its own scheduler name, the fake nodes its pool
    create_namespace(control_plane, "arena-railforge")
    adapter = run_scheduler(
        {
            "scheduler_name": "arena-railforge",
            "node_selector": f"{POOL_LABEL}={POOL}",
            "min_period_seconds": 0.05,
            "resync_seconds": 2,
            "leader_election": {"enabled": False},
        }
    )
    wait_for("railforge's caches", adapter.synced, 30)  # as kube-scheduler's are before its first pod
    railforge = Contender("railforge", "arena-railforge", SCHEDULER_PLUGINS)
    observed = run(control_plane.api, "arena-railforge", JOBS, railforge, TEST_IMAGE, timeout=60)
    results["railforge"] = summary(JOBS, observed, capacity)
    by_job = {result.name: result for result in job_results(JOBS, observed, results["railforge"]["makespan_s"])}
    assert {times.phase for times in observed.pods.values()} == {"Succeeded"}, observed.pods  # ended by KWOK
    assert results["railforge"]["completed"] == 3 and results["railforge"]["gangs_partly_bound"] == 0, results
    assert by_job["a"].completion >= 3  # it ran its 3 s
    # b needs the whole pool: it starts when a ends, not after c (later, 4 GPUs) took part of what a left
    assert by_job["a"].completion - 0.2 - 0.5 <= by_job["b"].wait <= by_job["a"].completion - 0.2 + 1
    assert 0 < results["railforge"]["gpu_utilisation"] <= 1

    # kube-scheduler's defaults (lone pods), then its own gangs (scheduling.k8s.io PodGroups), on the same nodes once
    # the pods before have ended
    for name, gang in (("kube-scheduler", None), ("kube-scheduler native gangs", NATIVE)):
        scheduler = control_plane.start_scheduler(native_gangs=gang is NATIVE)
        contender = Contender(name, "default-scheduler", gang)
        try:
            namespace = f"arena-{contender.slug}"
            create_namespace(control_plane, namespace)
            observed = run(control_plane.api, namespace, JOBS, contender, TEST_IMAGE, timeout=60)
        finally:
            control_plane.stop_component(scheduler)
        results[name] = summary(JOBS, observed, capacity)
        assert results[name]["completed"] == 3, results
        assert {times.phase for times in observed.pods.values()} == {"Succeeded"}
    by_job = {result.name: result for result in job_results(JOBS, observed, results[name]["makespan_s"])}
    assert by_job["b"].wait >= by_job["a"].completion - 0.2 - 0.5  # a native gang too: b waited for the whole pool
    print(json.dumps(results, indent=2))  # side by side (pytest -s)
