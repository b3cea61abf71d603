"""Walltime (Slurm's time limit): with ``walltime_grace`` set, a gang still running past its own max runtime plus
the grace fails, its reason saying so; within the grace, without a max runtime, or with the setting off, it runs."""

import pytest
from sched_helpers import gang, nodes, running

from railforge.scheduler import Fail, Queue, Scheduler, SchedulerConfig, Snapshot, decide

NOW = 100_000.0


def failures(config: SchedulerConfig, *gangs, decider=decide) -> list[Fail]:
    snapshot = Snapshot(NOW, tuple(nodes(4)), (Queue("a"),), (), tuple(gangs), config=config)
    return list(decider(snapshot).failures)


@pytest.mark.parametrize("decider", [decide, Scheduler().decide], ids=["decide", "incremental"])
def test_a_gang_past_its_max_runtime_and_the_grace_fails_and_says_why(decider):
    config = SchedulerConfig(walltime_grace=300.0)
    over = running(gang("over", 1, 8, runtime=3600.0), ["n00"], start=NOW - 3901)
    within = running(gang("within", 1, 8, runtime=3600.0), ["n01"], start=NOW - 3899)
    open_ended = running(gang("open", 1, 8, runtime=None), ["n02"], start=NOW - 90_000)
    assert failures(config, over, within, open_ended, decider=decider) == [
        Fail("over", "ran past its max runtime of 1h and the walltime grace of 5m")
    ]


def test_off_by_default_nothing_is_ended():
    over = running(gang("over", 1, 8, runtime=3600.0), ["n00"], start=NOW - 90_000)
    assert failures(SchedulerConfig(), over) == []


def test_the_grace_must_be_a_duration():
    with pytest.raises(ValueError, match=r"walltime_grace is -1\.0; expected None or a number of seconds >= 0"):
        SchedulerConfig(walltime_grace=-1.0)
