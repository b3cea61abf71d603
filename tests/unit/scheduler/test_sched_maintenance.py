"""Nodes reserved for maintenance from a time on (``Node.maintenance_from``): only gangs expected to end before the
window starts there, reasons and expected starts say so, and from the window's start nothing new is placed there."""

from dataclasses import replace

import pytest
from sched_helpers import gang, nodes, running

from railforge.scheduler import Queue, ReasonCode, Scheduler, SchedulerConfig, Snapshot, decide
from railforge.scheduler.model import Node

NOW = 1_000_000.0
QUEUES = (Queue("a"),)


def decided(cluster, pending, running_gangs=(), decider=decide):
    return decider(
        Snapshot(NOW, tuple(cluster), QUEUES, tuple(pending), tuple(running_gangs), config=SchedulerConfig())
    )


def window(cluster: list[Node], name: str, start: float) -> list[Node]:
    return [replace(node, maintenance_from=start) if node.name == name else node for node in cluster]


@pytest.mark.parametrize("decider", [decide, Scheduler().decide], ids=["decide", "incremental"])
def test_only_a_gang_that_ends_before_the_window_starts_on_its_node(decider):
    cluster = window(nodes(2), "n00", NOW + 3600)
    busy = running(gang("busy", 1, 8, runtime=7200.0), ["n01"], start=NOW - 60)
    short = gang("short", 1, 8, runtime=1800.0)
    long = gang("long", 1, 8, runtime=7200.0, submit=-1.0)  # first in line
    got = decided(cluster, [long, short], [busy], decider)
    assert [(b.gang_name, b.placement) for b in got.binds] == [("short", {"short-0": "n00"})]
    # the long gang waits: n00 is held from the window on, so it is reserved on n01, once busy ends
    (reservation,) = got.reservations
    assert (reservation.gang_name, reservation.nodes, reservation.start) == ("long", ("n01",), NOW - 60 + 7200)
    assert got.reasons.code("long") == ReasonCode.RESERVED


def test_a_gang_that_would_run_into_the_window_says_so():
    cluster = window(nodes(2), "n00", NOW + 3600)
    busy = running(gang("busy", 1, 8, runtime=None), ["n01"], start=NOW - 60)  # no end known: nothing reserved
    got = decided(cluster, [gang("long", 1, 8, runtime=7200.0)], [busy])
    assert not got.binds
    assert got.reasons.code("long") == ReasonCode.MAINTENANCE
    assert str(got.reasons["long"]) == (
        "the nodes it fits on now are reserved for maintenance from 1970-01-12T14:46:40Z (n00); it starts there only "
        "with a max runtime that ends before"
    )
    unbounded = decided(cluster, [gang("open", 1, 8, runtime=None)], [busy])  # no max runtime: never before it
    assert not unbounded.binds and unbounded.reasons.code("open") == ReasonCode.MAINTENANCE


def test_no_start_is_promised_past_a_window_and_the_reason_names_it():
    cluster = window(nodes(1), "n00", NOW + 3600)
    short = running(gang("short", 1, 4, runtime=1800.0), ["n00"], start=NOW - 60)
    got = decided(cluster, [gang("long", 1, 8, runtime=7200.0)], [short])
    assert not got.binds and not got.reservations
    assert got.reasons.code("long") == ReasonCode.MAINTENANCE
    assert str(got.reasons["long"]) == (
        "needs 8 GPUs, 4 free now; cannot be reserved: no start leaves it its max runtime before the maintenance of "
        "n00 from 1970-01-12T14:46:40Z"
    )


def test_from_the_window_on_nothing_new_starts_there_and_the_reason_names_the_nodes():
    cluster = window(nodes(2), "n00", NOW - 10)
    busy = running(gang("busy", 1, 8, runtime=None), ["n01"], start=NOW - 60)
    got = decided(cluster, [gang("tiny", 1, 1, runtime=60.0)], [busy])
    assert not got.binds
    assert str(got.reasons["tiny"]).endswith("; n00 in maintenance since 1970-01-12T13:46:30Z"), got.reasons["tiny"]
    # a gang already running there is left to end (draining it is the operator's: kubectl drain)
    there = running(gang("there", 1, 4, runtime=None), ["n00"], start=NOW - 60)
    assert not decided(cluster, [], [busy, there]).evictions


def test_a_maintenance_time_must_be_a_finite_number():
    with pytest.raises(ValueError, match="Node n: maintenance_from is nan; expected None or a finite number"):
        Node("n", {}, maintenance_from=float("nan"))
