"""decide() shares nothing it should not: decisions read from several threads, caches that stay
bounded, and snapshot objects it never writes to."""

import pickle
import sys
import threading
from dataclasses import replace

import pytest
from sched_helpers import gang, nodes, running

from railforge.scheduler import GPU, Gang, Member, Queue, Scheduler, Snapshot, decide
from railforge.scheduler.core import MEMO_KEYS_PER_GANG, MEMO_SLACK


def full_cluster_snapshot(waiting: int) -> Snapshot:
    """Two full nodes, a head that gets the reservation and ``waiting`` gangs the pass leaves
    untried: their reasons are worked out on the first read."""
    run = tuple(running(gang(f"r{i}", 1, 8, runtime=7200), [f"n0{i}"]) for i in range(2))
    pending = (gang("head", 2, 8), *(gang(f"w{i}", 1, 8, submit=1 + i) for i in range(waiting)))
    return Snapshot(100.0, tuple(nodes(2)), (Queue("a"),), pending, run)


def run_switching_often(targets) -> None:
    """Run each target in its own thread, switching threads as often as possible (mid-fill included)."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=target) for target in targets]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)


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

        run_switching_often([read] * 8)
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


def test_lists_handed_to_snapshot_objects_are_copied_so_later_edits_change_nothing():
    # A gang built from a list of members (4 GPUs) binds; the caller then appends a member to that
    # list (12 GPUs, more than the one 8-GPU node holds). The gang kept its own tuple, so the held
    # Scheduler, which remembers the gang's profile, still decides as a fresh call on it does.
    members = [Member("g-0", {GPU: 4, "cpu": 1000})]
    node_list = nodes(1)
    g = Gang("g", "a", members, max_runtime=3600.0, tolerations=[])
    snap = Snapshot(100.0, node_list, [Queue("a")], [g], [], usage={"a": 0.0})
    scheduler = Scheduler()
    assert [b.gang_name for b in scheduler.decide(snap).binds] == ["g"]
    members.append(Member("g-1", {GPU: 8, "cpu": 1000}))
    node_list.append(nodes(2)[1])
    assert g.members == (Member("g-0", {GPU: 4, "cpu": 1000}),) and len(snap.nodes) == 1
    assert isinstance(snap.pending, tuple) and isinstance(g.tolerations, tuple)
    with pytest.raises(TypeError, match="read-only"):
        snap.usage["a"] = 1.0
    assert scheduler.decide(snap).binds == decide(snap).binds


def test_reasons_read_while_the_scheduler_decides_the_next_snapshot_are_a_fresh_calls():
    # A dashboard thread reads each call's reasons (worked out on first read, from the Scheduler's
    # memo) while the loop's thread already decides the next snapshot, whose new node selectors add
    # key ids to the same memo. Each call's reasons must equal those of a fresh decide().
    cluster = tuple(nodes(2))
    run = tuple(running(gang(f"r{i}", 1, 8, runtime=7200), [f"n0{i}"]) for i in range(2))

    def snapshot(batch: int) -> Snapshot:
        waiting = (
            gang(f"b{batch}-{k}", 1, 1 + k % 8, submit=1 + k, node_selector={"team": f"t{batch}-{k % 40}"})
            for k in range(150)
        )
        return Snapshot(100.0, cluster, (Queue("a"),), (gang("head", 2, 8), *waiting), run)

    snapshots = [snapshot(batch) for batch in range(12)]
    scheduler = Scheduler()
    made: list = []
    read: dict[int, dict[str, str]] = {}

    def loop():
        for snap in snapshots:
            made.append(scheduler.decide(snap))

    def dashboard():
        while len(read) < len(snapshots):
            for i, decisions in enumerate(list(made)):
                if i not in read:
                    read[i] = {name: (reason, reason.code) for name, reason in decisions.reasons.items()}

    run_switching_often([loop, dashboard])
    for i, snap in enumerate(snapshots):
        fresh = decide(snap).reasons
        assert read[i] == {name: (reason, reason.code) for name, reason in fresh.items()}
