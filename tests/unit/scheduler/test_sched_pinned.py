"""Gangs whose members are pinned to named nodes (a pod's nodeSelector on kubernetes.io/hostname), as
perftest's server/client pairs are: each member starts on its own node or the gang waits, all or nothing."""

from dataclasses import replace

import pytest
from sched_helpers import gang, nodes, running

from railforge.scheduler import (
    GPU,
    Gang,
    Member,
    Node,
    Queue,
    ReasonCode,
    SchedulerConfig,
    Snapshot,
    Taint,
    TopologyConstraint,
    decide,
)

QUEUES = (Queue("a"),)
EASY = SchedulerConfig()


def pair(name: str, server: str, client: str, gpus: int = 0, cpu: int = 1000, **kw) -> Gang:
    """A perftest-like pair: a server pod pinned to one node, a client pod to another."""
    members = (
        Member(f"{name}-server", {GPU: gpus, "cpu": cpu}, node=server),
        Member(f"{name}-client", {GPU: gpus, "cpu": cpu}, node=client),
    )
    return Gang(name, "a", members, max_runtime=600.0, **kw)


def decided(cluster, pending, running_gangs=(), config=EASY):
    return decide(Snapshot(0.0, tuple(cluster), QUEUES, tuple(pending), tuple(running_gangs), config=config))


def test_each_member_starts_on_the_node_it_names_not_where_best_fit_would_put_it():
    cluster = nodes(4)
    # best fit would pack both 1-GPU pods on one node; the pins split them over n03 and n00
    got = decided(cluster, [pair("ring-0", "n03", "n00", gpus=1)])
    (bind,) = got.binds
    assert bind.placement == {"ring-0-server": "n03", "ring-0-client": "n00"}


def test_pairs_of_a_ring_each_start_on_their_two_nodes():
    cluster = nodes(3)
    names = [node.name for node in cluster]
    pending = [pair(f"ring-{i}", names[i], names[(i + 1) % 3], gpus=1) for i in range(3)]
    got = decided(cluster, pending)
    placed = {bind.gang_name: bind.placement for bind in got.binds}
    assert placed == {
        f"ring-{i}": {f"ring-{i}-server": names[i], f"ring-{i}-client": names[(i + 1) % 3]} for i in range(3)
    }


def test_a_busy_pinned_node_keeps_the_whole_gang_waiting_and_says_which_node():
    cluster = nodes(4)
    busy = running(gang("busy", 1, 8), ["n01"])
    got = decided(cluster, [pair("ring-0", "n00", "n01", gpus=1)], [busy], SchedulerConfig(backfill="none"))
    assert got.binds == []  # no member starts alone: n00 is free, n01 is not
    assert got.reasons.code("ring-0") == ReasonCode.CAPACITY_PINNED
    assert str(got.reasons["ring-0"]) == "needs 1 GPU on node n01, where its members are pinned; it has 0 free"


def test_a_waiting_pinned_gang_reserves_its_nodes_and_starts_when_they_free():
    cluster = nodes(2)
    busy = running(gang("busy", 1, 8, runtime=100.0), ["n01"])
    got = decided(cluster, [pair("ring-0", "n00", "n01", gpus=4)], [busy])
    (reservation,) = got.reservations
    assert reservation.gang_name == "ring-0" and reservation.start == 100.0
    assert sorted(reservation.nodes) == ["n00", "n01"]
    assert decided(cluster, [pair("ring-0", "n00", "n01", gpus=4)]).binds[0].placement == {
        "ring-0-server": "n00",
        "ring-0-client": "n01",
    }


@pytest.mark.parametrize(
    ("cluster", "gang_", "words"),
    [
        (
            nodes(2),
            pair("p", "n00", "gone"),
            "member p-client is pinned to node gone, which is not a schedulable, ready node",
        ),
        (
            [Node("n00", {GPU: 8, "cpu": 64_000}), Node("n01", {GPU: 8, "cpu": 64_000}, schedulable=False)],
            pair("p", "n00", "n01"),
            "member p-client is pinned to node n01, which is not a schedulable, ready node",
        ),
        (
            [Node("n00", {"cpu": 64_000}), Node("n01", {"cpu": 64_000}, taints=(Taint("dedicated", "x"),))],
            pair("p", "n00", "n01"),
            "member p-client is pinned to node n01, which the gang's node rules rule out",
        ),
        (
            nodes(8),
            pair("p", "n00", "n05", topology=TopologyConstraint("leaf")),
            "member p-client is pinned to node n05, which is in another leaf than node n00",
        ),
        (
            nodes(2),
            pair("p", "n00", "n00", gpus=6),
            "member p-server is pinned to node n00, which has 8 GPUs allocatable; its members there need 12 GPUs",
        ),
    ],
    ids=["unknown-node", "unschedulable", "tainted", "other-domain", "too-small"],
)
def test_a_pin_that_can_never_hold_refuses_the_gang_naming_member_and_node(cluster, gang_, words):
    got = decided(cluster, [gang_])
    assert got.binds == [] and got.reservations == []
    assert got.reasons.code("p") == ReasonCode.NEVER_FITS_PINNED
    assert str(got.reasons["p"]) == "does not fit even with nothing running: " + words


def test_gangs_pinned_alike_share_a_failure_but_not_with_other_pins():
    cluster = nodes(3)
    busy = running(gang("busy", 1, 8), ["n00"])
    pending = [pair("x", "n00", "n01", gpus=1), pair("y", "n00", "n01", gpus=1), pair("z", "n01", "n02", gpus=1)]
    got = decided(cluster, pending, [busy], SchedulerConfig(backfill="none", skip_ahead=True))
    assert [bind.gang_name for bind in got.binds] == ["z"]
    assert got.reasons.code("x") == got.reasons.code("y") == ReasonCode.CAPACITY_PINNED


def test_a_gang_pins_all_its_members_or_none():
    with pytest.raises(ValueError, match=r"Gang g: members \['g-0'\] name a node and \['g-1'\] do not"):
        Gang("g", "a", (Member("g-0", {"cpu": 1}, node="n00"), Member("g-1", {"cpu": 1})))


def test_an_optional_pinned_member_joins_only_when_its_node_has_room():
    cluster = nodes(2)
    busy = running(gang("busy", 1, 8), ["n01"])
    members = (
        Member("g-0", {GPU: 2, "cpu": 1000}, node="n00"),
        Member("g-1", {GPU: 2, "cpu": 1000}, node="n01"),
    )
    got = decided(cluster, [Gang("g", "a", members, min_member=1, max_runtime=60.0)], [busy])
    assert got.binds[0].placement == {"g-0": "n00"}


def test_a_pinned_gang_needs_its_min_resources_gpus_free_as_any_gang_does():
    """min_resources may ask more GPUs than the pods: placement needs them free in the cluster, pinned or not."""
    cluster = nodes(2)
    busy = running(gang("busy", 1, 6), ["n01"])  # 10 of 16 GPUs left free
    members = (Member("g-0", {"cpu": 1000}, node="n00"), Member("g-1", {GPU: 1, "cpu": 1000}, node="n01"))
    wants_12 = Gang("g", "a", members, max_runtime=60.0, min_resources={GPU: 12})
    got = decided(cluster, [wants_12], [busy], SchedulerConfig(backfill="none"))
    assert got.binds == []
    assert str(got.reasons["g"]) == "needs 12 GPUs; the cluster has 10 free"
    never = decided(cluster, [replace(wants_12, min_resources={GPU: 24})])
    assert str(never.reasons["g"]) == (
        "does not fit even with nothing running: needs 24 GPUs; the schedulable nodes have 16 in all"
    )
    assert decided(cluster, [replace(wants_12, min_resources={GPU: 10})], [busy]).binds[0].placement == {
        "g-0": "n00",
        "g-1": "n01",
    }
