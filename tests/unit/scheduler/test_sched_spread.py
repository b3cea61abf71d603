"""Gangs whose pods must spread over nodes (a required pod anti-affinity or topology spread on
kubernetes.io/hostname, as an MPIJob's workers often carry): never two where one is allowed, all or
nothing; a preference is kept where it can be and dropped where it cannot."""

import pytest
from sched_helpers import gang, nodes, running

from railforge.scheduler import GPU, Gang, Member, Node, Queue, ReasonCode, SchedulerConfig, Snapshot, Spread, decide

QUEUES = (Queue("a"),)
SOURCE = "spec.affinity.podAntiAffinity on kubernetes.io/hostname"


def decided(cluster, pending, running_gangs=()):
    return decide(Snapshot(0.0, tuple(cluster), QUEUES, tuple(pending), tuple(running_gangs), config=SchedulerConfig()))


def mpi_job(name: str, workers: int, gpus: int, per_node: int = 1, required: bool = True, running=()) -> Gang:
    """A launcher of no GPUs and workers that spread ``per_node`` to a node."""
    members = (
        Member(f"{name}-launcher", {"cpu": 500}),
        *(Member(f"{name}-worker-{i}", {GPU: gpus, "cpu": 1000}) for i in range(workers)),
    )
    spread = Spread(tuple(m.name for m in members[1:]), per_node, tuple(running), required, SOURCE)
    return Gang(name, "a", members, max_runtime=600.0, spreads=(spread,))


def nodes_of(decisions, gang_name: str) -> dict[str, str]:
    return next(dict(bind.placement) for bind in decisions.binds if bind.gang_name == gang_name)


def test_workers_that_must_spread_land_on_distinct_nodes_where_best_fit_would_pack_them():
    got = decided(nodes(4, gpus=8), [mpi_job("j", workers=3, gpus=2)])
    placement = nodes_of(got, "j")
    workers = [node for member, node in placement.items() if "worker" in member]
    assert len(set(workers)) == 3
    assert placement["j-launcher"] in workers  # the launcher is not spread: it joins a worker


def test_without_the_spread_the_same_workers_share_one_node():
    plain = gang("j", pods=3, gpus=2)
    assert len(set(nodes_of(decided(nodes(4, gpus=8), [plain]), "j").values())) == 1


@pytest.mark.parametrize("per_node", [1, 2])
def test_a_gang_that_cannot_spread_waits_whole_and_says_why(per_node):
    cluster = [*nodes(2, gpus=8), Node("cpu-only", {"cpu": 64_000})]  # holds the launcher, no worker: not counted
    got = decided(cluster, [mpi_job("j", workers=2 * per_node + 1, gpus=1, per_node=per_node)])
    assert not got.binds
    assert got.reasons.code("j") == ReasonCode.NEVER_FITS_SPREAD
    count = 2 * per_node + 1
    assert str(got.reasons["j"]) == (
        f"does not fit even with nothing running: needs {count} pods at most {per_node} per node ({SOURCE}); "
        f"the nodes it may use take {2 * per_node}"
    )


def test_pods_already_counted_on_a_node_take_its_room():
    # n00 already runs a pod the spread counts: two workers need the two other nodes
    got = decided(nodes(3, gpus=8), [mpi_job("j", workers=2, gpus=1, running=[("n00", 1)])])
    workers = {node for member, node in nodes_of(got, "j").items() if "worker" in member}
    assert workers == {"n01", "n02"}


def test_a_spread_that_what_runs_now_blocks_waits_with_its_reason():
    cluster = nodes(2, gpus=8)
    busy = gang("busy", pods=1, gpus=8)
    got = decided(cluster, [mpi_job("j", workers=2, gpus=1)], [running(busy, ["n00"])])
    assert not got.binds
    assert got.reasons.code("j") in (ReasonCode.CAPACITY_SPREAD, ReasonCode.RESERVED)


def test_a_preferred_spread_is_kept_when_it_can_be_and_dropped_when_it_cannot():
    spread_out = decided(nodes(3, gpus=8), [mpi_job("j", workers=3, gpus=2, required=False)])
    assert len({node for member, node in nodes_of(spread_out, "j").items() if "worker" in member}) == 3
    packed = decided(nodes(1, gpus=8), [mpi_job("j", workers=3, gpus=2, required=False)])
    assert set(nodes_of(packed, "j").values()) == {"n00"}


def test_a_spread_naming_a_stranger_is_refused_when_built():
    with pytest.raises(ValueError, match="a spread names \\['x'\\]; expected members of the gang"):
        Gang("g", "a", (Member("m", {GPU: 1}),), spreads=(Spread(("x",), 1),))
