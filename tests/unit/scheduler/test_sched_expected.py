"""Expected starts (``scheduler.expected``): the reserved gang at its reservation's start, the gangs behind it at the
start a conservative plan finds for each in turn, none for a gang nothing can promise a start."""

from sched_helpers import gang, nodes, running

from railforge.scheduler import Queue, Scheduler, SchedulerConfig, Snapshot
from railforge.scheduler.expected import expected_starts

NOW = 1_000.0


def planned(pending, running_gangs, depth=32):
    snapshot = Snapshot(
        NOW, tuple(nodes(2)), (Queue("a"),), tuple(pending), tuple(running_gangs), config=SchedulerConfig()
    )
    decisions = Scheduler().decide(snapshot)
    return decisions, expected_starts(snapshot, decisions, depth)


def test_each_waiting_gang_gets_the_start_of_its_turn_behind_the_ones_before():
    holder = running(gang("holder", 2, 8, runtime=100.0), ["n00", "n01"], start=NOW)
    b = gang("b", 2, 8, runtime=50.0, submit=1.0)  # the whole pool: reserved once holder ends
    c = gang("c", 1, 8, runtime=30.0, submit=2.0)  # one node, after b
    d = gang("d", 2, 8, runtime=10.0, submit=3.0)  # the whole pool again, after c
    decisions, starts = planned([b, c, d], [holder])
    assert [r.gang_name for r in decisions.reservations] == ["b"]  # the decision reserves the first only
    assert starts == {"b": NOW + 100, "c": NOW + 150, "d": NOW + 180}
    _, shallow = planned([b, c, d], [holder], depth=1)
    assert shallow == {"b": NOW + 100, "c": NOW + 150}


def test_a_gang_bound_now_is_running_in_the_plan_and_one_without_a_known_start_has_none():
    forever = running(gang("forever", 1, 8, runtime=None), ["n00"], start=NOW)
    small = gang("small", 1, 4, runtime=60.0, submit=1.0)  # starts now on n01
    wide = gang("wide", 2, 8, runtime=60.0, submit=2.0)  # needs n00, held without an end
    after = gang("after", 1, 8, runtime=60.0, submit=3.0)  # n01 once small ends
    decisions, starts = planned([small, wide, after], [forever])
    assert [b.gang_name for b in decisions.binds] == ["small"]
    assert starts == {"after": NOW + 60}
