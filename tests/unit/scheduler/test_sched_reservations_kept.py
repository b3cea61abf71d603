"""Reservations are kept: event-driven replays of one queue with exact runtimes and pods of
different CPU and memory shapes, deciding at every arrival and every end.

A reservation promises its holder a start time. With exact runtimes, one queue, one priority,
no failures and nothing to reclaim, nothing can justify a later start: at each later decision the
holder starts, or is reserved again no later than promised. The default run draws a few dozen
replays; ``pytest -m slow`` draws 1,500 per backfill mode.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railforge.scheduler import (
    GPU,
    Gang,
    Member,
    Node,
    Queue,
    Reservation,
    RunningGang,
    SchedulerConfig,
    Snapshot,
    decide,
)

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODES = (SchedulerConfig(backfill="easy"), SchedulerConfig(backfill="conservative", reservation_depth=3))

node_shapes = st.tuples(st.sampled_from((4, 8)), st.sampled_from((32, 64, 96, 128)), st.sampled_from((256, 512, 1024)))
pod_shapes = st.tuples(st.sampled_from((0, 1, 2, 4, 8)), st.integers(1, 64), st.integers(8, 512))
jobs = st.tuples(
    st.lists(st.tuples(pod_shapes, st.integers(1, 2)), min_size=1, max_size=2),  # (pod shape, pods) per shape
    st.integers(0, 3),  # arrival gap, in units of 100 s
    st.integers(1, 10),  # runtime, in units of 100 s
)


@st.composite
def workloads(draw) -> tuple[tuple[Node, ...], list[Gang]]:
    shapes = draw(st.lists(node_shapes, min_size=2, max_size=4))
    nodes = tuple(
        Node(f"n{i}", {GPU: gpus, "cpu": cpu, "memory": memory}, topology=("s0", f"leaf{i // 2}", f"nvl{i}"))
        for i, (gpus, cpu, memory) in enumerate(shapes)
    )
    gangs = []
    submit = 0.0
    for number, (pods, gap, runtime) in enumerate(draw(st.lists(jobs, min_size=3, max_size=9))):
        submit += 100.0 * gap
        members = []
        for (gpus, cpu, memory), count in pods:
            requests = {GPU: gpus, "cpu": cpu, "memory": memory}
            members += [Member(f"g{number}-{len(members) + pod}", requests) for pod in range(count)]
        gangs.append(Gang(f"g{number}", "a", tuple(members), submit_time=submit, max_runtime=100.0 * runtime))
    return nodes, gangs


def slips(nodes: tuple[Node, ...], gangs: list[Gang], config: SchedulerConfig) -> list[str]:
    """Replay the gangs, deciding at every arrival and end; each time a holder neither starts nor
    is reserved again by the start it was promised, say so."""
    arrivals = sorted(gangs, key=lambda gang: gang.submit_time)
    pending: list[Gang] = []
    running: list[RunningGang] = []
    promised: dict[str, float] = {}  # holder -> start its last reservation promised
    reservations: tuple[Reservation, ...] = ()  # handed back to the next decision
    found = []
    now = 0.0
    while True:
        pending += [gang for gang in arrivals if gang.submit_time <= now]
        arrivals = [gang for gang in arrivals if gang.submit_time > now]
        running = [r for r in running if r.expected_end > now]
        snapshot = Snapshot(
            now, nodes, (Queue("a"),), tuple(pending), tuple(running), config=config, reservations=reservations
        )
        decisions = decide(snapshot)
        reservations = tuple(decisions.reservations)
        assert not decisions.evictions, decisions.evictions  # nothing ends early: nothing to evict
        bound = {bind.gang_name: bind for bind in decisions.binds}
        reserved = {reservation.gang_name: reservation.start for reservation in decisions.reservations}
        for holder, start in promised.items():
            if holder not in bound and reserved.get(holder, math.inf) > start:
                found.append(
                    f"at {now:g}: {holder}, promised {start:g}, {decisions.reasons[holder]!r}"
                    f" (reservation now at {reserved.get(holder, math.inf):g})"
                )
        promised = reserved
        for gang in pending:
            bind = bound.get(gang.name)
            if bind is not None:
                runtime = gang.max_runtime
                running.append(RunningGang(gang, bind.placement, now, now + runtime, False, (), bind.backfilled_past))
        pending = [gang for gang in pending if gang.name not in bound]
        events = [gang.submit_time for gang in arrivals] + [r.expected_end for r in running]
        if not events:
            return found
        now = min(events)


@pytest.mark.parametrize("config", MODES, ids=("easy", "conservative"))
@FAST
@given(workload=workloads())
def test_reservations_never_slip(config, workload):
    assert slips(*workload, config) == []


@pytest.mark.slow
@pytest.mark.parametrize("config", MODES, ids=("easy", "conservative"))
@SLOW
@given(workload=workloads())
def test_reservations_never_slip_many_cases(config, workload):
    assert slips(*workload, config) == []
