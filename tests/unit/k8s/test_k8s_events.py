"""What the reporter sends: each Event once per interval per object, and a bounded rate over all objects; what waits
to be written is one write per object (the latest), bounded, the urgent ones first."""

import math
import threading
import time

from railforge.k8s.events import EVENT_BURST, EVENTS_PER_SECOND, Reporter, WriteQueue
from railforge.k8s.gangapis import SCHEDULER_PLUGINS


def pod(index: int) -> dict:
    return {"metadata": {"name": f"p{index}", "namespace": "ml", "uid": f"uid-{index}"}}


def test_the_same_event_on_one_object_is_sent_once_per_interval():
    reporter = Reporter(api=None, component="railforge", interval=60)  # not started: writes stay queued
    for _ in range(5):
        reporter.event("Pod", pod(0), "Unschedulable", "needs 16 GPUs")
    reporter.event("Pod", pod(0), "Unschedulable", "needs 24 GPUs")  # another reason: a new Event
    assert len(reporter.work) == 2


def test_events_over_all_objects_are_rate_limited():
    sent = EVENT_BURST + 100
    started = time.monotonic()
    reporter = Reporter(api=None, component="railforge", interval=60)
    for index in range(sent):
        reporter.event("Pod", pod(index), "Unschedulable", "needs 16 GPUs")
    # The burst, and what the rate refilled while the loop ran (a loaded machine runs it slower).
    refilled = math.ceil((time.monotonic() - started) * EVENTS_PER_SECOND)
    assert EVENT_BURST <= len(reporter.work) <= EVENT_BURST + refilled
    assert len(reporter.work) + reporter.dropped == sent
    assert reporter.dropped >= 100 - refilled


def test_a_status_equal_to_the_last_written_is_not_written_again():
    reporter = Reporter(api=None, component="railforge", interval=60)
    group = {"metadata": {"name": "g", "namespace": "ml", "uid": "uid-g"}}
    reporter.status(SCHEDULER_PLUGINS.kind, group, {"phase": "Pending"})
    reporter.status(SCHEDULER_PLUGINS.kind, group, {"phase": "Pending"})
    assert len(reporter.work) == 1
    reporter.status(SCHEDULER_PLUGINS.kind, group, {"phase": "Scheduled"})  # replaces the Pending still waiting
    assert len(reporter.work) == 1
    assert reporter.written[("status", "uid-g")] == {"phase": "Scheduled"}


def drained(work: WriteQueue) -> list[str]:
    """Run every waiting write in the order the reporter's thread would; what they wrote."""
    work.close()
    done: list[str] = []
    while (taken := work.take()) is not None:
        done.append(taken[1]())
    return done


def test_a_key_asked_again_while_waiting_is_written_once_with_the_latest_value_in_its_place():
    work = WriteQueue(limit=100, on_drop=print)
    for value in ("a1", "b1", "a2", "c1", "a3"):
        work.put(value[0], lambda value=value: value)
    assert drained(work) == ["a3", "b1", "c1"]


def test_urgent_writes_go_first_and_an_urgent_one_replaces_an_ordinary_one_of_its_key():
    work = WriteQueue(limit=100, on_drop=print)
    for key in "abc":
        work.put(key, lambda key=key: f"{key} waiting")
    work.put("b", lambda: "b bound", urgent=True)
    work.put("d", lambda: "d new", urgent=True)
    work.put("b", lambda: "b later")  # stays urgent: its place is the urgent one
    assert drained(work) == ["b later", "d new", "a waiting", "c waiting"]


def test_beyond_the_limit_the_oldest_ordinary_write_is_dropped_and_handed_back_never_an_urgent_one():
    dropped: list[str] = []
    work = WriteQueue(limit=3, on_drop=dropped.append)
    work.put("urgent", lambda: "urgent", urgent=True)
    for index in range(5):
        work.put(f"k{index}", lambda index=index: f"k{index}")
    assert dropped == ["k0", "k1"] and work.dropped == 2
    assert drained(work) == ["urgent", "k2", "k3", "k4"]


def test_a_dropped_status_is_forgotten_so_the_next_pass_asks_for_it_again():
    reporter = Reporter(api=None, component="railforge", interval=60)
    reporter.work.limit = 2
    groups = [{"metadata": {"name": f"g{i}", "namespace": "ml", "uid": f"uid-{i}"}} for i in range(3)]
    for group in groups:
        reporter.status(SCHEDULER_PLUGINS.kind, group, {"phase": "Pending"})
    assert len(reporter.work) == 2 and ("status", "uid-0") not in reporter.written
    reporter.status(SCHEDULER_PLUGINS.kind, groups[0], {"phase": "Pending"})  # the next pass: asked again, queued again
    assert ("status", "uid-0") in reporter.work.ordinary


def test_a_stopped_reporter_writes_its_backlog_until_its_time_is_up_and_nothing_after():
    reporter = Reporter(api=None, component="railforge", interval=60).start()
    written: list[int] = []
    for index in range(3):
        reporter.work.put(index, lambda index=index: written.append(index))
    reporter.stop(timeout=5)
    assert written == [0, 1, 2]

    reporter = Reporter(api=None, component="railforge", interval=60).start()
    release = threading.Event()
    reporter.work.put("slow", release.wait)  # the write under way when the time is up
    for index in range(3):
        reporter.work.put(index, lambda index=index: written.append(index))
    reporter.stop(timeout=0.2)
    release.set()
    reporter.thread.join(5)
    assert not reporter.thread.is_alive()
    assert written == [0, 1, 2]  # none of the second reporter's three
    assert reporter.work.dropped == 3
