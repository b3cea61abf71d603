"""Gangs whose pods must spread over nodes or zones (a required pod anti-affinity or topology spread, as an
MPIJob's workers often carry): never more in a domain than allowed, a topology spread's skew kept once the
whole gang has landed, all or nothing; a preference is kept where it can be and dropped where it cannot."""

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


def zoned(gpus_by_zone: dict[str, list[int]]) -> list[Node]:
    """Nodes z0-0, z0-1 ... with the GPUs given, labelled with their zone."""
    return [
        Node(f"{zone}-{i}", {GPU: gpus, "cpu": 64_000}, labels={"zone": zone})
        for zone, sizes in gpus_by_zone.items()
        for i, gpus in enumerate(sizes)
    ]


def zone_job(workers: int, spread: Spread) -> Gang:
    members = (Member("j-launcher", {"cpu": 500}), *(Member(f"j-worker-{i}", {GPU: 1}) for i in range(workers)))
    return Gang("j", "a", members, max_runtime=600.0, spreads=(spread,))


def zones_of(decisions) -> list[str]:
    return sorted(node.split("-")[0] for member, node in nodes_of(decisions, "j").items() if "worker" in member)


WORKERS = tuple(f"j-worker-{i}" for i in range(4))


def test_a_spread_over_zones_keeps_each_zones_room_all_or_nothing():
    apart = Spread(WORKERS[:2], 1, source="anti", topology_key="zone")
    got = decided(zoned({"z0": [8, 8], "z1": [8]}), [zone_job(2, apart)])
    assert zones_of(got) == ["z0", "z1"]  # best fit alone would put both on one node
    counted = Spread(WORKERS[:2], 1, (("z1", 1),), source="anti", topology_key="zone")
    blocked = decided(zoned({"z0": [8, 8], "z1": [8]}), [zone_job(2, counted)])
    assert not blocked.binds and blocked.reasons.code("j") == ReasonCode.CAPACITY_SPREAD
    never = decided(zoned({"z0": [8, 8], "z1": [8]}), [zone_job(3, Spread(WORKERS[:3], 1, topology_key="zone"))])
    assert never.reasons.code("j") == ReasonCode.NEVER_FITS_SPREAD and "per zone domain" in str(never.reasons["j"])


def test_a_topology_spread_evens_the_zones_where_a_cap_alone_would_not():
    # z0 already holds 2: of 4 new workers with a skew of 1, z1 takes 3 and z0 1 (3 and 3)
    skewed = Spread(WORKERS, None, (("z0", 2), ("z1", 0)), topology_key="zone", max_skew=1)
    got = decided(zoned({"z0": [8], "z1": [2, 2]}), [zone_job(4, skewed)])
    assert zones_of(got) == ["z0", "z1", "z1", "z1"]
    # z1 holds only 2: 4 and 2 would break the skew, 3 and 1 too; the gang waits
    tight = decided(zoned({"z0": [8], "z1": [1, 1]}), [zone_job(4, skewed)])
    assert not tight.binds and tight.reasons.code("j") == ReasonCode.CAPACITY_SPREAD


@pytest.mark.parametrize(
    ("spread", "words"),
    [
        (lambda: Spread(("m",), None), "max_per_domain is None; expected a whole number"),
        (lambda: Spread(("m",), 1, max_skew=1), "max_skew is 1 beside max_per_domain 1"),
        (lambda: Spread(("m",), None, max_skew=0), "max_skew is 0"),
        (lambda: Spread(("m",), 1, topology_key=""), "topology_key is empty"),
    ],
)
def test_a_spread_of_neither_or_both_rules_is_refused_naming_the_field(spread, words):
    with pytest.raises(ValueError, match=words):
        spread()
