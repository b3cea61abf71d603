"""The seed scenarios: backfill around a big head gang, weighted sharing, reclaiming a borrower."""

from sched_helpers import gang, nodes, running

from railforge.scheduler import GPU, Queue, SchedulerConfig, Snapshot, TopologyConstraint, decide


def test_big_gang_at_head_small_jobs_backfill_around_it():
    cluster = nodes(8)
    busy = [running(gang(f"r{i}", 1, 8, runtime=4000 + 1000 * i), [f"n{i:02d}"]) for i in range(6)]
    big = gang("big", 8, 8, submit=1, runtime=10_000)
    smalls = [gang(f"s{i}", 1, 8, submit=2 + i, runtime=rt) for i, rt in enumerate((3000, 50_000))]
    d = decide(Snapshot(0.0, tuple(cluster), (Queue("a"),), (big, *smalls), tuple(busy)))
    assert [(r.gang_name, r.start) for r in d.reservations] == [("big", 9000)]
    assert [b.gang_name for b in d.binds] == ["s0"]  # ends before the reservation starts
    assert d.reasons["s1"].startswith("blocked behind reservation of gang big")


def test_two_teams_share_by_weight():
    queues = (Queue("vision", over_quota_weight=1.0), Queue("speech", over_quota_weight=3.0))
    pending = [gang(f"v{i}", 1, 8, queue="vision", submit=i) for i in range(8)]
    pending += [gang(f"s{i}", 1, 8, queue="speech", submit=i) for i in range(8)]
    config = SchedulerConfig(backfill="none", fair_share_half_life=0)
    d = decide(Snapshot(0.0, tuple(nodes(8)), queues, tuple(pending), (), {}, config))
    started = [b.gang_name[0] for b in d.binds]
    assert started.count("s") == 6 and started.count("v") == 2


def test_borrower_is_reclaimed_for_queue_below_quota():
    queues = (Queue("owner", quota={GPU: 32}), Queue("borrower"))
    borrowed = [
        running(
            gang(f"b{i}", 2, 8, queue="borrower", priority=i, runtime=86400.0),
            [f"n{2 * i:02d}", f"n{2 * i + 1:02d}"],
            start=100.0 * i,
            borrowed=True,
        )
        for i in range(4)
    ]
    claim = gang("claim", 2, 8, queue="owner")
    d = decide(Snapshot(5000.0, tuple(nodes(8)), queues, (claim,), tuple(borrowed)))
    assert [e.gang_name for e in d.evictions] == ["b0"]  # lowest priority
    assert sorted(d.binds[0].placement.values()) == ["n00", "n01"]
    assert not d.binds[0].borrowed


def test_reclaim_takes_the_borrower_whose_eviction_loses_the_least_work():
    """An 8-GPU borrower 1,000 s old has done 8,000 GPU-s, a 1-GPU one 2,000 s old 2,000 GPU-s; either frees the
    one GPU the claim needs: the younger but larger gang is spared."""
    queues = (Queue("owner", quota={GPU: 8}), Queue("borrower"))
    large = running(gang("large", 1, 8, queue="borrower", runtime=86400.0), ["n00"], start=4000.0, borrowed=True)
    small = running(gang("small", 1, 1, queue="borrower", runtime=86400.0), ["n01"], start=3000.0, borrowed=True)
    filler = running(gang("filler", 1, 7, queue="owner", runtime=86400.0), ["n01"], start=0.0)
    config = SchedulerConfig(min_runtime_before_reclaim=0, reclaim_cost_limit=None)
    claim = gang("claim", 1, 1, queue="owner")
    d = decide(Snapshot(5000.0, tuple(nodes(2)), queues, (claim,), (large, small, filler), config=config))
    assert [e.gang_name for e in d.evictions] == ["small"], d.reasons
    assert d.binds[0].placement == {"claim-0": "n01"}


def test_reclaim_frees_one_leaf_for_a_gang_that_prefers_one():
    """Three borrowers of one node each, alike but for their names; the claim prefers one leaf. Evicting the first
    two in victim order, a on n00 and b on n02, would make room across leaves for the same work that a and c free in
    leaf 0: the leaf wins the tie (n03 is the owner's own)."""
    queues = (Queue("owner", quota={GPU: 32}), Queue("borrower"))
    borrowed = [
        running(gang(name, 1, 8, queue="borrower", runtime=86400.0), [node], start=4900.0, borrowed=True)
        for name, node in (("a", "n00"), ("b", "n02"), ("c", "n01"))
    ]
    filler = running(gang("filler", 1, 8, queue="owner", runtime=86400.0), ["n03"], start=0.0)
    config = SchedulerConfig(min_runtime_before_reclaim=0, reclaim_cost_limit=None)
    claim = gang("claim", 2, 8, queue="owner", topology=TopologyConstraint("leaf", required=False))
    d = decide(Snapshot(5000.0, tuple(nodes(4, per_leaf=2)), queues, (claim,), (*borrowed, filler), config=config))
    assert sorted(e.gang_name for e in d.evictions) == ["a", "c"], d.reasons
    assert sorted(d.binds[0].placement.values()) == ["n00", "n01"]


def test_fair_order_counts_what_running_gangs_will_add_not_the_gpus_held_now():
    """Both queues hold 8 GPUs on an 8-GPU node, with the same weight and no usage yet; queue a's gang runs a day
    more, queue b's a minute: b has been served less by the time both end, so b's gang gets the reservation."""
    queues = (Queue("a"), Queue("b"))
    long_run = running(gang("long", 1, 8, queue="a", runtime=86400.0), ["n00"], start=0.0)
    short_run = running(gang("short", 1, 8, queue="b", runtime=60.0), ["n01"], start=0.0)
    waiting = (gang("a-next", 2, 8, queue="a", submit=1.0), gang("b-next", 2, 8, queue="b", submit=2.0))
    config = SchedulerConfig(fair_share_half_life=86400.0)
    cluster = nodes(2, gpus=8)
    d = decide(Snapshot(0.0, tuple(cluster), queues, waiting, (long_run, short_run), config=config))
    assert [r.gang_name for r in d.reservations] == ["b-next"], d.reasons
