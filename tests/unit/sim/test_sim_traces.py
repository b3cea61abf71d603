from __future__ import annotations

import math

import pytest

from railforge.scheduler.model import GPU
from railforge.sim.estimates import HOUR, LIMIT, estimate
from railforge.sim.traces import JobRecord, Trace, load_generic_csv, load_trace, size_for_load
from railforge.sim.workload import build_gang, build_queues, largest_remainder, members_for, split_gpus


def test_philly_fixture(traces_dir):
    trace = load_trace("philly", traces_dir)
    assert trace.name == "philly"
    assert len(trace.jobs) == 300
    submits = [j.submit for j in trace.jobs]
    assert submits == sorted(submits) and submits[0] == 0.0
    assert {j.queue for j in trace.jobs} == {"vc-6214e9", "vc-11cb48", "vc-ee9e8c", "vc-103959", "vc-6c71a0"}
    assert sorted({j.gpus for j in trace.jobs}) == [1, 4, 8]
    # the file is not sorted: row 3 (2017-09-29 07:58:32, 860662 s) is the earliest of the excerpt rows 1-4
    row3 = next(j for j in trace.jobs if j.job_id == "philly-00003")
    assert row3.duration == 860662.0 and row3.queue == "vc-6c71a0"


def test_itp_fixture(traces_dir):
    trace = load_trace("itp:cluster01", traces_dir)
    assert trace.name == "itp-cluster01"
    assert len(trace.jobs) == 300
    first = trace.jobs[0]
    assert first.job_id == "965d744f-0445-c1a8-12af-97e4c536c66e"
    assert (first.submit, first.duration, first.gpus, first.queue) == (0.0, 2429.0, 64, "default")
    assert trace.jobs[1].submit == 2000581 - 1932025
    assert trace.max_gpus == 64


def test_generic_csv(traces_dir):
    trace = load_generic_csv(traces_dir / "generic.csv")
    assert [j.gpus for j in trace.jobs] == [8, 1, 16, 2, 4, 1]
    assert [j.queue for j in trace.jobs] == ["research", "prod", "research", "default", "prod", "research"]
    assert trace.jobs[1].priority == 10 and trace.jobs[1].user_estimate == 7200
    assert trace.jobs[0].user_estimate is None and trace.jobs[0].priority == 0


def test_generic_csv_missing_column(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("submit,gpus\n0,1\n")
    with pytest.raises(ValueError, match="duration"):
        load_generic_csv(bad)


def test_unknown_trace():
    with pytest.raises(ValueError):
        load_trace("nope")


def _trace(*jobs):
    return Trace("t", [JobRecord(f"j{i}", s, d, g) for i, (s, d, g) in enumerate(jobs)])


def test_size_for_load_rounds_up_and_fits_largest_job():
    # 100 GPU-days of work over 10 days at load 0.84 -> 11.9 GPUs -> 2 nodes of 8
    day = 86400.0
    assert size_for_load(_trace((0, 10 * day, 10), (10 * day, 1, 1))) == 2
    # a 64-GPU job forces 8 nodes whatever the load
    assert size_for_load(_trace((0, 100, 64), (10 * day, 1, 1))) == 8


def test_split_and_members():
    assert split_gpus(8, 8) == [8]
    assert split_gpus(12, 8) == [6, 6]
    assert split_gpus(24, 8) == [8, 8, 8]
    assert split_gpus(20, 8) == [7, 7, 6]
    single = members_for(4)
    assert len(single) == 1 and single[0].requests[GPU] == 4
    multi = members_for(16)
    assert [m.name for m in multi] == ["launcher", "worker-0", "worker-1"]
    assert GPU not in multi[0].requests
    assert sum(m.requests.get(GPU, 0) for m in multi) == 16


def test_gang_topology_and_queues():
    job = JobRecord("big", 0, 100, 32, "q")
    gang = build_gang(job, "exact")
    assert gang.topology is not None and gang.topology.level == "leaf" and not gang.topology.required
    assert gang.max_runtime == 100 and gang.oracle_runtime == 100
    assert build_gang(JobRecord("s", 0, 100, 8), "exact").topology is None
    assert largest_remainder({"a": 2, "b": 1, "c": 1}, 10) == {"a": 5, "b": 3, "c": 2}
    trace = Trace("t", [JobRecord("x", 0, 10, 1, "a"), JobRecord("y", 0, 30, 1, "b")])
    queues = build_queues(trace, 8)
    assert {q.name: q.quota[GPU] for q in queues} == {"a": 2, "b": 6}


def test_estimates():
    jobs = [JobRecord(f"j{i}", 0, d, 1) for i, d in enumerate([1, 59.5, 3599, 3601, 86400, 10 * 86400])]
    for job in jobs:
        assert estimate(job, "exact") == math.ceil(job.duration)
        user = estimate(job, "user")
        assert user >= job.duration
        assert user % HOUR == 0
        assert user <= max(LIMIT, math.ceil(job.duration / HOUR) * HOUR)
        assert user == estimate(job, "user")  # seeded: reproducible
    assert estimate(JobRecord("z", 0, 500, 1, user_estimate=7200), "user") == 7200
    assert estimate(JobRecord("z", 0, 500, 1, user_estimate=60), "user") == 500
    many = [estimate(JobRecord(f"k{i}", 0, 600, 1), "user") for i in range(2000)]
    share_limit = sum(1 for e in many if e == LIMIT) / len(many)
    assert 0.15 < share_limit < 0.25
    with pytest.raises(ValueError):
        estimate(jobs[0], "psychic")
