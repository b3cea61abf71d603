"""decide() shares nothing it should not: decisions read from several threads, caches that stay
bounded, and snapshot objects it never writes to."""

import pickle
import sys
import threading
from dataclasses import replace

import pytest
from sched_helpers import gang, nodes, running

from railforge.scheduler import GPU, Member, Queue, Scheduler, Snapshot, decide
from railforge.scheduler.core import MEMO_KEYS_PER_GANG, MEMO_SLACK


def full_cluster_snapshot(waiting: int) -> Snapshot:
    """Two full nodes, a head that gets the reservation and ``waiting`` gangs the pass leaves
    untried: their reasons are worked out on the first read."""
    run = tuple(running(gang(f"r{i}", 1, 8, runtime=7200), [f"n0{i}"]) for i in range(2))
    pending = (gang("head", 2, 8), *(gang(f"w{i}", 1, 8, submit=1 + i) for i in range(waiting)))
    return Snapshot(100.0, tuple(nodes(2)), (Queue("a"),), pending, run)


def test_concurrent_readers_of_one_decisions_see_every_reason():
    snap = full_cluster_snapshot(400)
    expected = {g.name for g in snap.pending}
    for _ in range(5):
        decisions = decide(snap)
        start = threading.Barrier(8)
        seen: list[dict[str, str]] = []

        def read(decisions=decisions, start=start, seen=seen):
            start.wait()
            seen.append(dict(decisions.reasons))

        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # switch threads as often as possible, mid-fill included
        try:
            threads = [threading.Thread(target=read) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            sys.setswitchinterval(switch)
        assert [set(reasons) for reasons in seen] == [expected] * 8
        assert all(reasons == seen[0] for reasons in seen)


def scheduler_globals() -> dict[str, int]:
    """Size of every container held at module level by the scheduler's modules."""
    return {
        f"{name}.{attribute}": len(value)
        for name, module in sys.modules.items()
        if name.startswith("railforge.scheduler")
        for attribute, value in vars(module).items()
        if isinstance(value, (dict, list, set))
    }


def test_ten_thousand_gangs_with_distinct_selectors_leave_no_growing_cache():
    cluster = tuple(nodes(4))
    before = None
    scheduler = Scheduler()
    for batch in range(100):
        pending = tuple(gang(f"g{batch}-{k}", 1, 1, node_selector={"team": f"t{batch}-{k}"}) for k in range(100))
        snap = Snapshot(100.0, cluster, (Queue("a"),), pending, ())
        len(scheduler.decide(snap).reasons)
        memo = scheduler.indexes_for(snap)[0]
        assert memo.key_entries() <= MEMO_KEYS_PER_GANG * len(pending) + MEMO_SLACK
        assert memo.object_entries() <= 2 * len(pending) + MEMO_SLACK
        before = before or scheduler_globals()
    assert scheduler_globals() == before


def test_snapshot_objects_refuse_edits_and_decide_writes_nothing_to_them():
    snap = full_cluster_snapshot(3)
    member, node, run = snap.pending[0].members[0], snap.nodes[0], snap.running[0]
    for mapping in (member.requests, node.allocatable, node.labels, snap.pending[0].node_selector, run.placement):
        with pytest.raises(TypeError, match="read-only"):
            mapping["cpu"] = 1
    with pytest.raises(AttributeError):  # slots: not even object.__setattr__ attaches a cache to a gang
        object.__setattr__(snap.pending[0], "_profile", {})
    pickled = pickle.dumps(snap)
    len(decide(snap).reasons)
    assert pickle.dumps(snap) == pickled


def test_a_new_pod_request_gives_decisions_on_the_new_value():
    # The same gang name with a bigger CPU request, built anew (the old one cannot be edited):
    # the next call in the same thread decides on the new request, not a remembered one.
    cluster = tuple(nodes(1))  # 64 CPUs
    small = gang("g", 1, 1)
    assert [b.gang_name for b in decide(Snapshot(100.0, cluster, (Queue("a"),), (small,), ())).binds] == ["g"]
    big = replace(small, members=(Member("g-0", {GPU: 1, "cpu": 100_000}),))
    d = decide(Snapshot(100.0, cluster, (Queue("a"),), (big,), ()))
    assert d.binds == [] and d.reasons["g"].startswith("does not fit even with nothing running")
