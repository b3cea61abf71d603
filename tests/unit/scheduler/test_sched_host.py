"""The host contract (``scheduler.host``): usage accrual and decay, binds and restarts, a gang's GPUs; and one
event sequence driven through it as the simulator keeps it and as the Kubernetes adapter rebuilds it."""

import math

import pytest

from railforge.k8s.annotations import BORROWED, STARTED_AT
from railforge.k8s.gangapis import SCHEDULER_PLUGINS
from railforge.k8s.settings import settings_from_mapping
from railforge.k8s.translate import translate
from railforge.scheduler import GPU, Gang, Member, Restart, RunningGang, Scheduler, SchedulerConfig, host
from railforge.sim.cluster import ClusterShape, build_nodes
from railforge.sim.engine import SimJob, Simulator
from railforge.sim.traces import JobRecord, Trace
from railforge.sim.workload import build_gang, build_queues

HOUR = 3600.0
RUNTIME = 5 * 86400.0


def test_gang_gpus_counts_every_member():
    gang = Gang("g", "a", (Member("launcher", {"cpu": 1000}), Member("w0", {GPU: 8}), Member("w1", {GPU: 4})))
    assert host.gang_gpus(gang) == 12


def test_held_gpus_sums_running_gangs_per_queue():
    def running(name: str, queue: str, gpus: int) -> RunningGang:
        return host.started(Gang(name, queue, (Member("w", {GPU: gpus}),)), {"w": "n0"}, 0.0)

    assert host.held_gpus([running("x", "a", 8), running("y", "a", 2), running("z", "b", 1)]) == {"a": 10, "b": 1}


def test_usage_decays_to_half_after_one_half_life_with_nothing_held():
    assert host.accrue_usage({"a": 100.0}, {}, HOUR, HOUR) == {"a": pytest.approx(50.0)}


def test_usage_held_for_a_long_time_approaches_gpus_times_mean_life():
    # a constant allocation a: u -> a * h / ln 2
    usage = host.accrue_usage({}, {"a": 8}, 100 * HOUR, HOUR)
    assert usage == {"a": pytest.approx(8 * HOUR / math.log(2))}


def test_usage_accrued_in_two_steps_equals_one_step():
    once = host.accrue_usage({"a": 30.0, "b": 5.0}, {"a": 4}, 900.0, HOUR)
    twice = host.accrue_usage(host.accrue_usage({"a": 30.0, "b": 5.0}, {"a": 4}, 400.0, HOUR), {"a": 4}, 500.0, HOUR)
    assert twice == pytest.approx(once)


def test_usage_without_half_life_adds_gpu_seconds_and_never_decays():
    assert host.accrue_usage({"a": 10.0}, {"a": 2, "b": 1}, 60.0, 0.0) == {"a": 130.0, "b": 60.0}


def test_no_time_elapsed_changes_nothing():
    assert host.accrue_usage({"a": 10.0}, {"a": 8}, 0.0, HOUR) == {"a": 10.0}


def test_started_expects_the_end_after_the_max_runtime():
    gang = Gang("g", "a", (Member("w", {GPU: 1}),), max_runtime=600.0)
    run = host.started(gang, {"w": "n0"}, 100.0, borrowed=True, backfilled_past="h")
    assert (run.start_time, run.expected_end, run.borrowed, run.backfilled_past) == (100.0, 700.0, True, "h")
    unbounded = host.started(Gang("u", "a", (Member("w", {GPU: 1}),)), {"w": "n0"}, 100.0)
    assert unbounded.expected_end == math.inf


def test_restarted_counts_one_more_restart_and_keeps_the_backoff():
    gang = Gang("g", "a", (Member("w", {GPU: 1}),), restart_count=2)
    waiting = host.restarted(gang, Restart("g", 500.0, "member w failed"))
    assert (waiting.restart_count, waiting.not_before, waiting.name) == (3, 500.0, "g")


def _recorded_simulation():
    """Three 16-GPU jobs on four 8-GPU nodes, arriving an hour apart and running for days: the third waits.
    Returns every snapshot the simulator handed decide() and every bind it got back."""
    trace = Trace(
        "seq", [JobRecord(name, submit, RUNTIME, 16) for name, submit in (("a", 0), ("b", HOUR), ("c", 7200))]
    )
    shape = ClusterShape(nodes=4)
    scheduler = Scheduler()
    calls = []

    def decide(snapshot):
        decisions = scheduler.decide(snapshot)
        calls.append((snapshot, decisions))
        return decisions

    jobs = [SimJob(build_gang(job, "exact"), job.duration) for job in trace.jobs]
    config = SchedulerConfig.preset("railforge", fair_share_half_life=HOUR)
    Simulator(build_nodes(shape), build_queues(trace, shape.total_gpus), jobs, config, decide, resync=600.0).run()
    return config, calls


def test_the_simulators_usage_is_the_contracts_fold_over_what_the_adapter_sees():
    """The adapter sees, at each pass, the gangs running since the previous one (no gang ends in this sequence)
    and accrues usage from them with the host contract: the simulator hands decide() exactly that usage."""
    config, calls = _recorded_simulation()
    calls = [(snapshot, d) for snapshot, d in calls if snapshot.now < RUNTIME]  # before the first gang ends
    assert len(calls) > 3 and any(snapshot.running for snapshot, _ in calls)
    usage: dict[str, float] = {}
    previous = calls[0][0].now
    for snapshot, _ in calls:
        usage = host.accrue_usage(
            usage, host.held_gpus(snapshot.running), snapshot.now - previous, config.fair_share_half_life
        )
        previous = snapshot.now
        assert {q: u for q, u in snapshot.usage.items() if u} == pytest.approx({q: u for q, u in usage.items() if u})


def _bound_pod(name: str, node: str, gpus: int, started_at: float, deadline: float) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-11-23T20:00:00Z",
            "labels": {"scheduling.x-k8s.io/pod-group": "job"},
            "annotations": {STARTED_AT: repr(started_at), BORROWED: "false"},
        },
        "spec": {
            "schedulerName": "railforge",
            "nodeName": node,
            "activeDeadlineSeconds": int(deadline),
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


def test_a_bind_becomes_the_same_running_gang_in_the_simulator_and_in_the_adapter():
    """The first bind of the sequence, written as the adapter's write side leaves its pods (bound, started-at,
    borrowed), is read back by the adapter's translation as the running gang the simulator made of it."""
    _, calls = _recorded_simulation()
    bound_at, bind = next((snapshot.now, d.binds[0]) for snapshot, d in calls if d.binds)
    simulated = next(r for snapshot, _ in calls for r in snapshot.running if r.gang.name == bind.gang_name)
    gpus = {member.name: member.requests.get(GPU, 0) for member in simulated.gang.members}
    pods = [
        _bound_pod(member, node, gpus[member], bound_at, simulated.gang.max_runtime)
        for member, node in bind.placement.items()
    ]
    nodes = [
        {
            "metadata": {"name": node, "labels": {}},
            "spec": {},
            "status": {
                "allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for node in sorted(set(bind.placement.values()))
    ]
    group = {
        "metadata": {"name": "job", "namespace": "ml", "uid": "uid-job", "creationTimestamp": "2026-11-23T20:00:00Z"},
        "spec": {"minMember": len(pods)},
    }
    view = translate(
        nodes,
        pods,
        [],
        {(SCHEDULER_PLUGINS, "ml", "job"): group},
        [],
        {},
        settings_from_mapping({}),
        now=bound_at + 60.0,
    )
    [adapted] = view.running
    seen = (adapted.placement, adapted.start_time, adapted.expected_end, adapted.borrowed, adapted.failed_members)
    assert seen == (
        simulated.placement,
        simulated.start_time,
        simulated.expected_end,
        simulated.borrowed,
        simulated.failed_members,
    )
    assert host.gang_gpus(adapted.gang) == host.gang_gpus(simulated.gang) == 16
