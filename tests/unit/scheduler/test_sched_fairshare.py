import pytest

from railforge.scheduler import GPU, Queue
from railforge.scheduler.fairshare import QueueTree, Usage, fair_shares, water_fill


def test_water_fill_quota_first_then_weights():
    shares = water_fill(100, {"a": 80, "b": 80}, {"a": 20, "b": 0}, {"a": 1, "b": 3})
    # a gets its quota 20, the remaining 80 split 1:3 -> a +20, b +60
    assert shares == pytest.approx({"a": 40, "b": 60})


def test_water_fill_redistributes_unused_share():
    shares = water_fill(100, {"a": 10, "b": 200, "c": 200}, {}, {"a": 1, "b": 1, "c": 1})
    assert shares == pytest.approx({"a": 10, "b": 45, "c": 45})


def test_water_fill_scales_oversubscribed_quotas():
    shares = water_fill(60, {"a": 100, "b": 100}, {"a": 60, "b": 60}, {})
    assert shares == pytest.approx({"a": 30, "b": 30})


def test_hierarchical_shares_follow_parent_and_limits():
    tree = QueueTree(
        [
            Queue("org-a", quota={GPU: 50}),
            Queue("org-b", quota={GPU: 50}),
            Queue("a1", parent="org-a", over_quota_weight=1),
            Queue("a2", parent="org-a", over_quota_weight=3),
            Queue("b1", parent="org-b", limit={GPU: 10}),
        ]
    )
    shares = fair_shares(tree, {"a1": 100, "a2": 100, "b1": 100}, capacity=100)
    assert shares["org-b"] == pytest.approx(10)  # capped by b1's limit of 10
    assert shares["org-a"] == pytest.approx(90)
    assert shares["a1"] == pytest.approx(22.5)
    assert shares["a2"] == pytest.approx(67.5)


def test_usage_limits_and_borrowing_count_ancestors():
    tree = QueueTree([Queue("org", quota={GPU: 8}, limit={GPU: 16}), Queue("team", parent="org")])
    usage = Usage(tree)
    usage.add("team", {GPU: 8})
    assert usage.gpus("org") == 8
    assert usage.borrows("team", {GPU: 1})
    assert usage.over_limit("team", {GPU: 8}) is None
    assert usage.over_limit("team", {GPU: 9}) == ("org", GPU, 16)


def test_a_parent_guarantees_what_its_children_are_guaranteed_for_what_it_does_not_name():
    tree = QueueTree(
        [
            Queue("org"),  # groups its teams; names no quota
            Queue("capped", quota={GPU: 8}),  # names its GPUs; its child's count no more
            Queue("t1", parent="org", quota={GPU: 8, "cpu": 4000}),
            Queue("t2", parent="org", quota={GPU: 4}),
            Queue("t3", parent="capped", quota={GPU: 16, "cpu": 2000}),
        ]
    )
    assert tree.quota("org") == {GPU: 12, "cpu": 4000}
    assert tree.quota("capped") == {GPU: 8, "cpu": 2000}
    usage = Usage(tree)
    assert not usage.borrows("t1", {GPU: 8})  # within t1's and org's guarantee
    usage.add("t1", {GPU: 8})
    assert usage.borrows("t2", {GPU: 8})  # past t2's 4 and org's 12
    assert usage.borrows("t3", {GPU: 12})  # within t3's 16, past capped's 8
    shares = fair_shares(tree, {"t1": 16, "t2": 16}, capacity=12)
    assert shares["org"] == pytest.approx(12) and shares["t1"] == pytest.approx(8)
