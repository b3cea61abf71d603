"""The simulator on tiny hand-computed scenarios, driving the real scheduler core."""

from __future__ import annotations

from dataclasses import replace

import pytest

from railforge.scheduler import Scheduler
from railforge.scheduler.model import GPU, Bind, Decisions, Queue, Restart, SchedulerConfig
from railforge.sim.cluster import ClusterShape, build_nodes
from railforge.sim.engine import ARRIVE, COMPLETE, FAIL, REPAIR, SimJob, Simulator
from railforge.sim.metrics import summarise
from railforge.sim.predictions import Predictor, accuracy
from railforge.sim.traces import JobRecord, Trace, load_trace
from railforge.sim.workload import build_gang, build_queues


def run(jobs, policy="strict_fifo", nodes=1, estimates="exact", decide=None, **kw):
    """Simulate (name, submit, duration, gpus[, queue]) jobs on ``nodes`` 8-GPU nodes."""
    trace = Trace("tiny", [JobRecord(str(name), *fields) for name, *fields in jobs])
    shape = ClusterShape(nodes=nodes)
    queues = build_queues(trace, shape.total_gpus)
    sim_jobs = [SimJob(build_gang(j, estimates), j.duration) for j in trace.jobs]
    sim = Simulator(
        build_nodes(shape),
        queues,
        sim_jobs,
        SchedulerConfig.preset(policy),
        decide,
        trace="tiny",
        policy=policy,
        **kw,
    )
    res = sim.run()
    return res, {j.job_id: j for j in res.jobs}, sim


def test_event_kind_order():
    # completions free capacity before same-time arrivals look for it
    assert COMPLETE < REPAIR < FAIL < ARRIVE


def test_fifo_two_jobs_exact_jct():
    res, jobs, _ = run([("a", 0, 100, 8), ("b", 10, 50, 8)])
    assert (jobs["a"].first_start, jobs["a"].end) == (0, 100)
    assert (jobs["b"].first_start, jobs["b"].end) == (100, 150)
    s = summarise(res)
    assert s["jct"]["mean"] == pytest.approx((100 + 140) / 2)
    assert s["wait"]["mean"] == pytest.approx((0 + 90) / 2)
    assert s["makespan"] == 150
    # 8 of 8 GPUs busy over the whole arrival window [0, 10]
    assert s["util"] == pytest.approx(1.0)
    assert s["util_makespan"] == pytest.approx((100 * 8 + 50 * 8) / (150 * 8))


def test_completion_and_arrival_at_same_time_reuse_capacity():
    _res, jobs, sim = run([("a", 0, 100, 8), ("b", 100, 10, 8)])
    assert jobs["b"].first_start == 100 and jobs["b"].end == 110
    # arrivals at t=0, then t=100 (completion + arrival batched into one decide call)
    assert sim.counters["decide_calls"] == 3  # t=0, t=100, t=110


SCENARIO = [("a", 0, 100, 4), ("b", 1, 10, 8), ("c", 2, 10, 1)]


def test_strict_fifo_blocks_behind_head():
    _, jobs, _ = run(SCENARIO, "strict_fifo")
    assert (jobs["b"].first_start, jobs["b"].end) == (100, 110)
    assert jobs["c"].first_start == 110 and jobs["c"].jct == 118


def test_best_effort_skips_ahead():
    _, jobs, _ = run(SCENARIO, "best_effort_fifo")
    assert jobs["c"].first_start == 2 and jobs["c"].jct == 10
    assert jobs["b"].first_start == 100


def test_best_effort_starves_the_big_gang():
    # a steady stream of small jobs keeps at least one GPU busy: the 8-GPU gang never fits
    small = [(f"s{i}", 5.0 * i, 6, 1) for i in range(40)]
    _, fifo, _ = run([("big", 1, 10, 8), *small], "strict_fifo")
    _, be, _ = run([("big", 1, 10, 8), *small], "best_effort_fifo")
    assert fifo["big"].first_start == 6  # only waits for s0
    assert be["big"].first_start >= 5 * 39  # starts only after the stream dries up


def test_railforge_backfills_without_delaying_reservation():
    _res, jobs, sim = run(SCENARIO, "railforge")
    assert jobs["c"].first_start == 2  # ends at 12, well before b's reservation at 100
    assert jobs["b"].first_start == 100
    assert sim.counters["backfills"] == 1


def test_railforge_user_estimates_run():
    _res, jobs, _ = run(SCENARIO, "railforge", estimates="user")
    assert all(j.end is not None for j in jobs.values())


@pytest.mark.parametrize(("preempt", "head_start", "lost"), [(True, 1000, 8 * 998), (False, 5002, 0)])
def test_over_estimated_backfill_is_preempted_for_the_reservation_holder(preempt, head_start, lost):
    # Two 8-GPU nodes. "long" asked for 100,000 s and ends at 1,000. "head" (16 GPUs) reserves both
    # nodes for 100,000; "small" (5,000 s, asked for 50,000) backfills past it onto the free node.
    # When "long" ends early, "head" could start but for "small": preempted, it runs again after.
    # "late" only stretches the arrival window to [0, 3000], over which utilisation is measured.
    jobs = [("long", 0, 1000, 8, 100_000), ("head", 1, 100, 16, 100), ("small", 2, 5000, 8, 50_000)]
    jobs.append(("late", 3000, 10, 1, 10))
    records = [(JobRecord(name, submit, runtime, gpus), asked) for name, submit, runtime, gpus, asked in jobs]
    sim_jobs = [SimJob(replace(build_gang(r, "exact"), max_runtime=asked), r.duration) for r, asked in records]
    config = SchedulerConfig.preset("railforge", preempt_backfill=preempt)
    trace = Trace("tiny", [r for r, _ in records])
    sim = Simulator(build_nodes(ClusterShape(nodes=2)), build_queues(trace, 16), sim_jobs, config)
    res = sim.run()
    out = {j.job_id: j for j in res.jobs}
    assert out["head"].first_start == head_start
    assert sim.counters["preemptions"] == int(preempt) and sim.counters["lost_gpu_seconds"] == lost
    assert out["small"].end == (1100 + 5000 if preempt else 5002)
    s = summarise(res)
    assert s["util"] - s["util_useful"] == pytest.approx(lost / (16 * 3000))  # the lost run is all in the window


@pytest.mark.parametrize("policy", ["railforge", "strict_fifo", "best_effort_fifo"])
def test_unplaceable_gang_is_left_unfinished_with_its_reason(policy):
    done = []
    res, jobs, _ = run([("huge", 0, 10, 16), ("ok", 0, 10, 1)], policy, progress=done.append)
    assert jobs["ok"].end == 10 and jobs["huge"].end is None  # nobody waits behind it
    reason = "does not fit even with nothing running: needs 16 GPUs; the schedulable nodes have 8 in all"
    assert res.unfinished == {"huge": reason}
    s = summarise(res)
    assert s["unfinished"] == 1 and s["unfinished_reasons"] == {reason: 1}
    assert sum(done) == 1  # the progress callback heard of every finished job, up to the last


def test_restart_loses_progress():
    # a stub core: bind "a" at once; when it reports a failed member, restart it 50 s later
    def decide(snap):
        d = Decisions()
        for rg in snap.running:
            if rg.failed_members:
                d.restarts.append(Restart(rg.gang.name, snap.now + 50, "node lost"))
        for g in snap.pending:
            if g.not_before is None or g.not_before <= snap.now:
                d.binds.append(Bind(g.name, {m.name: "node-0001" for m in g.members}))
        return d

    trace_jobs = [("a", 0, 100, 8)]
    trace = Trace("tiny", [JobRecord(n, s, d, g) for n, s, d, g in trace_jobs])
    shape = ClusterShape(nodes=2)
    queues = build_queues(trace, 16)
    sim = Simulator(
        build_nodes(shape),
        queues,
        [SimJob(build_gang(j, "exact"), j.duration) for j in trace.jobs],
        SchedulerConfig.preset("railforge"),
        decide,
        resync=0,
    )
    sim.rng.choice = lambda seq: next(n for n in seq if n.name == "node-0001")  # deterministic victim
    sim.push(40.0, FAIL, None)
    res = sim.run()
    a = res.jobs[0]
    assert a.restarts == 1 and sim.counters["node_failures"] == 1
    # failed at 40, restarted (not before 90), runs the full 100 s again
    assert a.first_start == 0 and a.end == 190
    assert a.queueing_delay == 90


def test_node_failures_with_real_core_finish_everything():
    jobs = [(f"j{i}", 100.0 * i, 3000, 8 if i % 3 else 16) for i in range(30)]
    _res, out, sim = run(jobs, "railforge", nodes=4, failure_rate=5.0, repair_time=600, seed=3)
    assert sim.counters["node_failures"] > 0
    assert sim.counters["restarts"] > 0
    assert all(j.end is not None for j in out.values())
    assert any(j.restarts for j in out.values())


def test_fair_share_reference_is_the_schedulers_own():
    # 8 GPUs; queue a is owed its quota of 4, the other 4 are split 1:3 by over-quota weight while
    # both queues want the whole cluster: a 5 GPUs, b 3, over the arrival window [0, 100).
    records = [JobRecord("a0", 0, 1000, 8, "a"), JobRecord("b0", 0, 1000, 8, "b"), JobRecord("b1", 100, 10, 1, "b")]
    queues = [Queue("a", quota={GPU: 4}), Queue("b", over_quota_weight=3.0)]
    sim_jobs = [SimJob(build_gang(r, "exact"), r.duration) for r in records]
    sim = Simulator(build_nodes(ClusterShape(nodes=1)), queues, sim_jobs, SchedulerConfig.preset("railforge"))
    res = sim.run()
    assert res.queue_fair == pytest.approx({"a": 500.0, "b": 300.0})
    assert summarise(res)["queue_ratio"] == pytest.approx({"a": 800 / 500, "b": 0.0})


@pytest.mark.parametrize(("policy", "failure_rate"), [("railforge", 0.5), ("railforge", 0.0), ("strict_fifo", 0.5)])
def test_every_call_of_a_replay_decides_as_a_cold_start(traces_dir, policy, failure_rate):
    """A Scheduler carries its gang indexes from call to call: in replays with and without node
    failures (restart backoff; railforge with failures also reclaims), each call's decisions equal
    those of a cold start (a fresh Scheduler, which has no indexes)."""
    cold_calls = []
    scheduler = Scheduler()

    def checked(snap):
        warm = scheduler.decide(snap)
        cold_calls.append(Scheduler().decide(snap) == warm)
        return warm

    trace = load_trace("philly", traces_dir)
    jobs = [(j.job_id, j.submit, j.duration, j.gpus, j.queue) for j in trace.jobs[:150]]
    _, out, sim = run(jobs, policy, nodes=2, decide=checked, failure_rate=failure_rate, repair_time=1800, seed=7)
    assert len(cold_calls) > 300 and all(cold_calls)
    assert (sim.counters["restarts"] > 0) == (failure_rate > 0)
    assert (sim.counters["reclaims"] > 0) == (policy == "railforge" and failure_rate > 0)
    assert all(j.end is not None for j in out.values())


def test_expected_starts_recorded_when_gangs_first_wait_are_exact_with_exact_runtimes():
    # one 8-GPU node: a runs 100 s; b (submitted at 1) and c (at 2) wait; b is reserved, c planned behind it
    predictor = Predictor()
    res, _, _ = run([("a", 0, 100, 8), ("b", 1, 50, 8), ("c", 2, 30, 8)], policy="railforge", decide=predictor)
    assert predictor.predicted == {"b": 100.0, "c": 150.0}
    measured = accuracy(predictor.predicted, res.jobs)
    assert measured == {
        "waited": 2.0,
        "predicted": 2.0,
        "median_error_s": 0.0,
        "p90_error_s": 0.0,
        "median_wait_s": 123.5,
    }
