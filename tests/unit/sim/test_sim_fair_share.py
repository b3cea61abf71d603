"""Weighted fair share over days of saturation, with gangs of mixed sizes (slow: `make test-slow`)."""

import dataclasses
import random

import pytest

from railforge.scheduler import GPU, Gang, Member, Node, Queue, Scheduler, SchedulerConfig
from railforge.sim.engine import SimJob, Simulator

DAY = 86400.0
WEIGHTS = (1, 2, 3)


def saturated_queues(seed: int, sizes: tuple[int, ...]) -> tuple[list[Node], list[Queue], list[SimJob]]:
    """Six 8-GPU nodes and three queues weighted 1:2:3, each offered 1.5 times the whole cluster for a week:
    gangs of one pod, their size drawn from ``sizes``, exponential run times (mean 2 h, exact estimates)."""
    rng = random.Random(seed)
    nodes = [Node(f"n{i}", {GPU: 8, "cpu": 64_000}, topology=("s0", f"l{i // 3}", f"v{i}")) for i in range(6)]
    queues = [Queue(f"w{weight}", over_quota_weight=float(weight)) for weight in WEIGHTS]
    rate = 1.5 * 48 / (sum(sizes) / len(sizes) * 7200.0)  # gangs per second and queue
    jobs = []
    for queue in queues:
        submit = 0.0
        for number in range(10**6):
            submit += rng.expovariate(rate)
            if submit > 7 * DAY:
                break
            runtime = max(60.0, rng.expovariate(1 / 7200.0))
            member = Member(f"{queue.name}-{number}-0", {GPU: rng.choice(sizes), "cpu": 1000})
            gang = Gang(f"{queue.name}-{number}", queue.name, (member,), submit_time=submit, max_runtime=runtime)
            jobs.append(SimJob(gang, runtime))
    return nodes, queues, jobs


def served_shares(seed: int, config: SchedulerConfig, sizes: tuple[int, ...]) -> list[float]:
    """Each queue's part of the GPU-time held from day 2 to day 6, read off every decision the simulator applies."""
    nodes, queues, jobs = saturated_queues(seed, sizes)
    scheduler = Scheduler()
    held_since: list[tuple[float, dict[str, int]]] = []
    served = dict.fromkeys((queue.name for queue in queues), 0.0)

    def decide(snapshot):
        decisions = scheduler.decide(snapshot)
        if held_since:
            since, held = held_since[-1]
            start, end = max(since, 2 * DAY), min(snapshot.now, 6 * DAY)
            for queue, gpus in held.items():
                served[queue] += gpus * max(end - start, 0.0)
        gone = {evict.gang_name for evict in decisions.evictions} | {r.gang_name for r in decisions.restarts}
        held = dict.fromkeys(served, 0)
        for running in snapshot.running:
            if running.gang.name not in gone:
                held[running.gang.queue] += running.gang.members[0].requests[GPU]
        waiting = {gang.name: gang for gang in snapshot.pending}
        for bind in decisions.binds:
            gang = waiting[bind.gang_name]
            held[gang.queue] += gang.members[0].requests[GPU]
        held_since.append((snapshot.now, held))
        return decisions

    Simulator(nodes, queues, jobs, config, decide=decide).run()
    total = sum(served.values())
    return [served[queue.name] / total for queue in queues]


# Aging off: in an arrival stream that outgrows the cluster every gang eventually waits past the aging bound, and
# the order becomes oldest first, which is what aging is for.
CONFIG = SchedulerConfig(fair_share_half_life=DAY, aging_bound=None)
PARTS = [weight / sum(WEIGHTS) for weight in WEIGHTS]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_weighted_shares_hold_with_mixed_gang_sizes(seed):
    """1/2/4/8-GPU gangs alike in every queue: each queue's GPU-time over days 2-6 within 10 % of its weight's part
    under the default backfill order (measured: the weight-1 queue 6.8 % over, the others within 3 %; before the
    order counted what gangs will add, the weight-1 queue got 23-27 % more than its part)."""
    assert served_shares(seed, CONFIG, sizes=(1, 2, 4, 8)) == pytest.approx(PARTS, rel=0.10)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_weighted_shares_hold_within_5_percent_when_queues_over_their_share_backfill_last(seed):
    """The same with ``backfill_order="over_share_last"`` (measured: the weight-1 queue 3.1-3.2 % over)."""
    config = dataclasses.replace(CONFIG, backfill_order="over_share_last")
    assert served_shares(seed, config, sizes=(1, 2, 4, 8)) == pytest.approx(PARTS, rel=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("size", [1, 8])
def test_weighted_shares_hold_with_one_gang_size(size):
    assert served_shares(1, CONFIG, sizes=(size,)) == pytest.approx(PARTS, rel=0.05)
