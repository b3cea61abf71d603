"""What the reporter sends: each Event once per interval per object, and a bounded rate over all objects."""

import math
import time

from railforge.k8s.events import EVENT_BURST, EVENTS_PER_SECOND, Reporter


def pod(index: int) -> dict:
    return {"metadata": {"name": f"p{index}", "namespace": "ml", "uid": f"uid-{index}"}}


def test_the_same_event_on_one_object_is_sent_once_per_interval():
    reporter = Reporter(api=None, component="railforge", interval=60)  # not started: writes stay queued
    for _ in range(5):
        reporter.event("Pod", pod(0), "Unschedulable", "needs 16 GPUs")
    reporter.event("Pod", pod(0), "Unschedulable", "needs 24 GPUs")  # another reason: a new Event
    assert reporter.work.qsize() == 2


def test_events_over_all_objects_are_rate_limited():
    sent = EVENT_BURST + 100
    started = time.monotonic()
    reporter = Reporter(api=None, component="railforge", interval=60)
    for index in range(sent):
        reporter.event("Pod", pod(index), "Unschedulable", "needs 16 GPUs")
    # The burst, and what the rate refilled while the loop ran (a loaded machine runs it slower).
    refilled = math.ceil((time.monotonic() - started) * EVENTS_PER_SECOND)
    assert EVENT_BURST <= reporter.work.qsize() <= EVENT_BURST + refilled
    assert reporter.work.qsize() + reporter.dropped == sent
    assert reporter.dropped >= 100 - refilled


def test_a_status_equal_to_the_last_written_is_not_written_again():
    reporter = Reporter(api=None, component="railforge", interval=60)
    group = {"metadata": {"name": "g", "namespace": "ml", "uid": "uid-g"}}
    reporter.status("PodGroup", group, {"phase": "Pending"})
    reporter.status("PodGroup", group, {"phase": "Pending"})
    reporter.status("PodGroup", group, {"phase": "Scheduled"})
    assert reporter.work.qsize() == 2
