"""Malformed model values are refused when they are built (NaN times and amounts, repeated node names,
negative counts among them), and an unsound queue hierarchy when decide() is handed it, with what is wrong and
what was expected."""

import pytest
from sched_helpers import gang

from railforge.scheduler import (
    GPU,
    Gang,
    Member,
    Node,
    NodeSelectorRequirement,
    Queue,
    RunningGang,
    SchedulerConfig,
    Snapshot,
    Taint,
    Toleration,
    decide,
)

WORKER = Member("w0", {GPU: 8})
NAN = float("nan")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Member("w0", {GPU: -1}), "Member w0: requests['nvidia.com/gpu'] is -1; expected a whole number >= 0"),
        (lambda: Member("w0", {"cpu": 0.5}), "Member w0: requests['cpu'] is 0.5; expected a whole number >= 0"),
        (lambda: Node("n0", {GPU: True}), "Node n0: allocatable['nvidia.com/gpu'] is True; expected a whole number"),
        (lambda: Gang("g", "a", ()), "Gang g: members is empty; expected at least one member"),
        (lambda: Gang("g", "a", (WORKER, WORKER)), "Gang g: member names repeat in ['w0', 'w0']"),
        (lambda: Gang("g", "a", (WORKER,), min_member=2), "Gang g: min_member is 2; expected None or 1 to 1"),
        (lambda: Gang("g", "a", (WORKER,), max_runtime=0), "Gang g: max_runtime is 0; expected None or a number"),
        (lambda: Gang("g", "a", (WORKER,), schedule_timeout=-1), "Gang g: schedule_timeout is -1; expected None"),
        (lambda: Queue("a", parent="a"), "Queue a: parent is the queue itself"),
        (lambda: Queue("a", quota={GPU: -8}), "Queue a: quota['nvidia.com/gpu'] is -8"),
        (lambda: Queue("a", over_quota_weight=-1), "Queue a: over_quota_weight is -1; expected >= 0"),
        (lambda: Taint("k", effect="NoRun"), "Taint k: effect is 'NoRun'; expected one of"),
        (lambda: Toleration("k", operator="In"), "Toleration k: operator is 'In'; expected one of Equal, Exists"),
        (lambda: NodeSelectorRequirement("k", "Gt", ("1",)), "NodeSelectorRequirement k: operator is 'Gt'"),
        (lambda: NodeSelectorRequirement("k", "In"), "NodeSelectorRequirement k: values is (); In expects values"),
        (lambda: RunningGang(gang("g", 2, 8), {"g-0": "n0"}, 0.0), "RunningGang g: placement names ['g-0']"),
        (lambda: RunningGang(gang("g", 1, 8), {"x": "n0"}, 0.0), "RunningGang g: placement names ['x']"),
        (lambda: RunningGang(gang("g", 1, 8), {"g-0": "n0"}, NAN), "RunningGang g: start_time is nan; expected a"),
        (lambda: RunningGang(gang("g", 1, 8), {"g-0": "n0"}, 5.0, 1.0), "RunningGang g: expected_end is 1.0"),
        (lambda: Gang("g", "a", (WORKER,), submit_time=NAN), "Gang g: submit_time is nan; expected a finite number"),
        (lambda: Gang("g", "a", (WORKER,), not_before=NAN), "Gang g: not_before is nan; expected None or a finite"),
        (lambda: Gang("g", "a", (WORKER,), priority=NAN), "Gang g: priority is nan; expected a whole number"),
        (lambda: Gang("g", "a", (WORKER,), restart_count=-1), "Gang g: restart_count is -1; expected a whole number"),
        (lambda: Gang("g", "a", (WORKER,), oracle_runtime=NAN), "Gang g: oracle_runtime is nan; expected None"),
        (lambda: Snapshot(NAN, (), (), (), ()), "Snapshot: now is nan; expected a finite number"),
        (
            lambda: Snapshot(0.0, (Node("n0", {GPU: 8}), Node("n0", {GPU: 8})), (), (), ()),
            "Snapshot: nodes repeat the names ['n0']; expected one node per name",
        ),
        (lambda: Snapshot(0.0, (), (), (), (), {"a": -1.0}), "Snapshot: usage['a'] is -1.0; expected a finite number"),
        (lambda: SchedulerConfig(backfill="eager"), "SchedulerConfig: backfill is 'eager'; expected one of"),
        (lambda: SchedulerConfig(reservation_depth=0), "SchedulerConfig: reservation_depth is 0; expected >= 1"),
        (lambda: SchedulerConfig(aging_bound=-1.0), "SchedulerConfig: aging_bound is -1.0; expected None or"),
        (lambda: SchedulerConfig(max_restarts=-1), "SchedulerConfig: max_restarts is -1; expected None or >= 0"),
        (
            lambda: Gang("g", "q", (Member("m", {GPU: 1}),), owner_max_restarts=-1),
            "Gang g: owner_max_restarts is -1; expected None or a whole number >= 0",
        ),
        (lambda: SchedulerConfig(topology_level_names=("leaf",)), "topology_label_keys has 3 keys"),
    ],
)
def test_malformed_values_are_refused(build, message):
    with pytest.raises(ValueError) as refused:
        build()
    assert message in str(refused.value)


def test_well_formed_values_pass():
    Gang("g", "a", (Member("launcher", {"cpu": 1000}), WORKER), min_member=2, max_runtime=60, schedule_timeout=0)
    NodeSelectorRequirement("k", "Exists")
    RunningGang(Gang("g", "a", (WORKER, Member("w1", {GPU: 8})), min_member=1), {"w0": "n0"}, 0.0)
    assert SchedulerConfig(aging_bound=None, reclaim_cost_limit=None).aging_bound is None


@pytest.mark.parametrize(
    ("queues", "message"),
    [
        ((Queue("a"), Queue("a", quota={GPU: 8})), "queues: 'a' is declared twice; expected one Queue per name"),
        ((Queue("a", parent="orgg"),), "queues: 'a' names parent 'orgg', which is not declared"),
        ((Queue("a", parent="b"), Queue("b", parent="a")), "queues: parents form a cycle (a -> b -> a)"),
    ],
)
def test_unsound_queue_hierarchy_is_refused_before_deciding(queues, message):
    # an undeclared parent would lift the queue out of its parent's limit; a cycle has no root
    snapshot = Snapshot(0.0, (Node("n0", {GPU: 8}),), queues, (gang("g", 1, 1),), ())
    with pytest.raises(ValueError) as refused:
        decide(snapshot)
    assert message in str(refused.value)
