"""The scheduler's own annotations read back what it wrote, and read what older writers or hands left sensibly."""

import math

from railforge.k8s.annotations import (
    BORROWED,
    NOT_BEFORE,
    PLACEMENT,
    RESTARTS,
    STARTED_AT,
    Backoff,
    Start,
    decode_placement,
    encode_placement,
)


def test_a_start_reads_back_exactly_what_was_written():
    for start in (Start(1795900000.123456789, True, "big-gang"), Start(math.pi, False)):
        assert Start.decode(start.encode(), now=0.0) == start
    assert Start(5.0, False).encode() == {STARTED_AT: "5.0", BORROWED: "false"}  # no backfill: no key


def test_a_pod_without_start_annotations_started_now_and_borrowed_nothing():
    assert Start.decode({}, now=42.0) == Start(42.0, False, None)


def test_only_the_start_annotations_are_carried_to_pods_bound_later():
    bound = {**Start(7.0, True, "x").encode(), "example.com/other": "kept where it is"}
    assert Start.carried(bound) == Start(7.0, True, "x").encode()


def test_a_backoff_reads_back_and_none_removes_its_time():
    assert Backoff.decode(Backoff(3, 1795900030.5).encode()) == Backoff(3, 1795900030.5)
    assert Backoff(1, None).encode() == {RESTARTS: "1", NOT_BEFORE: None}  # a merge patch drops the key
    assert Backoff.decode({}) == Backoff(0, None)


def test_a_placement_reads_back_and_anything_unreadable_is_no_placement():
    plan = {"uid-b": "node-2", "uid-a": "node-1"}
    encoded = encode_placement(plan)
    assert encoded == '{"uid-a":"node-1","uid-b":"node-2"}'  # sorted, compact: one write per plan
    assert decode_placement({PLACEMENT: encoded}) == plan
    for broken in ("{not json", "[1, 2]", ""):
        assert decode_placement({PLACEMENT: broken}) == {}
