from dataclasses import replace

import pytest
from sched_helpers import gang, nodes, running

from railforge.scheduler import (
    GPU,
    Gang,
    Member,
    Node,
    NodeSelectorRequirement,
    Queue,
    Reservation,
    Scheduler,
    SchedulerConfig,
    Snapshot,
    Taint,
    Toleration,
    TopologyConstraint,
    decide,
    placement,
    topology_from_labels,
)
from railforge.scheduler.cycle import CycleState
from railforge.scheduler.reasons import UNFIT, duration
from railforge.scheduler.stages import admit, explain, order, recover

DAY = 86400.0


def snap(node_list, pending=(), run=(), queues=None, now=100.0, config=None, usage=None):
    """A snapshot; without ``queues``, every queue its gangs name is declared (no quota, no limit)."""
    if queues is None:
        queues = [Queue(name) for name in sorted({g.queue for g in pending} | {r.gang.queue for r in run})]
    return Snapshot(
        now,
        tuple(node_list),
        tuple(queues),
        tuple(pending),
        tuple(run),
        usage or {},
        config or SchedulerConfig(),
    )


def bound(decisions):
    return {b.gang_name: b.placement for b in decisions.binds}


# -- placement -------------------------------------------------------------------------------


def test_topology_from_labels_stops_at_missing_key():
    labels = {"railforge.io/spine": "s1", "railforge.io/leaf": "l2"}
    assert topology_from_labels(labels) == ("s1", "l2")


@pytest.mark.parametrize("per_node", ["node", "none"])
def test_a_per_node_nvlink_label_makes_each_node_its_own_domain(per_node):
    labels = {"railforge.io/spine": "s1", "railforge.io/leaf": "l2", "railforge.io/nvlink-domain": per_node}
    assert topology_from_labels(labels) == ("s1", "l2")
    cluster = [Node(f"n{i}", {GPU: 8, "cpu": 64_000}, labels=labels) for i in range(2)]
    one_domain = TopologyConstraint("nvlink", required=True)
    d = decide(snap(cluster, [gang("pair", 2, 8, topology=one_domain)]))
    assert "pair" not in bound(d)  # the two nodes' shared label value is no shared NVLink domain
    assert d.reasons["pair"].startswith("does not fit even with nothing running: needs 16 GPUs within one nvlink")


@pytest.mark.parametrize("keys", [None, ("site/spine", "site/leaf", "site/nvl")])
def test_nodes_without_a_topology_path_take_it_from_the_configured_label_keys(keys):
    spine, leaf, nvl = keys or ("railforge.io/spine", "railforge.io/leaf", "railforge.io/nvlink-domain")
    cluster = [
        Node(f"n{i}", {GPU: 8, "cpu": 64_000}, labels={spine: "s0", leaf: f"leaf{i // 2}", nvl: f"nvl{i}"})
        for i in range(4)
    ]
    busy = running(gang("busy", 1, 4), ["n0"])
    config = SchedulerConfig(topology_label_keys=keys) if keys else SchedulerConfig()
    one_leaf = TopologyConstraint("leaf", required=True)
    d = decide(snap(cluster, [gang("pair", 2, 8, topology=one_leaf)], [busy], config=config))
    assert sorted(bound(d)["pair"].values()) == ["n2", "n3"]  # the leaf n0 shares has 12 GPUs free
    d = decide(snap(cluster, [gang("three", 3, 8, topology=one_leaf)], config=config))
    assert d.reasons["three"].startswith("does not fit even with nothing running: needs 24 GPUs within one leaf")


def test_gang_prefers_one_nvlink_domain_then_one_leaf():
    cluster = nodes(8)  # nvl domains of 2 nodes, leaves of 4
    busy = running(gang("busy", 1, 8), ["n00"])
    d = decide(snap(cluster, [gang("pair", 2, 8), gang("quad", 4, 8, submit=1)], [busy]))
    placements = bound(d)
    pair_nodes = sorted(placements["pair"].values())
    assert pair_nodes in (["n02", "n03"], ["n04", "n05"], ["n06", "n07"])
    quad_leaves = {int(n[1:]) // 4 for n in placements["quad"].values()}
    assert len(quad_leaves) == 1


def test_gang_wider_than_a_leaf_fills_the_emptiest_leaves_first():
    cluster = nodes(12)  # three leaves of 4 nodes
    # leaf0 all free (32 GPUs); leaf1 28 free; leaf2 4 free
    busy = [running(gang("half1", 1, 4), ["n04"]), running(gang("half2", 1, 4), ["n08"])]
    busy += [running(gang(f"full{i}", 1, 8), [f"n{i:02d}"]) for i in (9, 10, 11)]
    d = decide(snap(cluster, [gang("wide", 10, 4)], busy))  # 40 GPUs: more than any leaf has
    # all of leaf0, then in leaf1 the emptier NVLink domain (n06, n07): 5 nodes in 2 leaves
    assert sorted(set(bound(d)["wide"].values())) == ["n00", "n01", "n02", "n03", "n06"]


def test_best_fit_fills_partly_used_node_first():
    cluster = nodes(4)
    busy = running(gang("busy", 1, 6), ["n02"])
    d = decide(snap(cluster, [gang("small", 1, 2)], [busy]))
    assert bound(d)["small"] == {"small-0": "n02"}


def test_launcher_joins_its_workers_rather_than_the_best_fit_node():
    # n00's GPUs are all in use, so for a GPU-less launcher it fits as tightly as the workers' nodes
    # and comes first: best fit alone would make it a third node the gang depends on, shared with
    # whatever runs there (every such launcher would land on it)
    busy = running(gang("busy", 1, 8), ["n00"])
    launcher = Member("launcher", {"cpu": 1000})
    workers = tuple(Member(f"w{i}", {GPU: 8, "cpu": 1000}) for i in range(2))
    mpi = Gang("mpi", "a", (launcher, *workers), max_runtime=60)
    placement = bound(decide(snap(nodes(4, per_nvl=1), [mpi], [busy])))["mpi"]  # one leaf, NVLink per host
    assert placement["launcher"] in {placement["w0"], placement["w1"]}
    assert len(set(placement.values())) == 2


def test_required_topology_is_strict_and_reason_names_best_domain():
    cluster = nodes(8)  # two leaves of 4 nodes
    busy = [running(gang("busy0", 1, 4), ["n00"]), running(gang("busy1", 1, 4), ["n04"])]
    wide = gang("wide", 4, 8, topology=TopologyConstraint("leaf", required=True))
    d = decide(snap(cluster, [wide], busy, config=SchedulerConfig(backfill="none")))
    assert d.binds == []
    assert d.reasons["wide"] == "needs 32 GPUs within one leaf; the best leaf has 28 free"


def test_all_or_nothing_with_unready_cordoned_and_tainted_nodes():
    cluster = [
        Node("a", {GPU: 8, "cpu": 8000}),
        Node("b", {GPU: 8, "cpu": 8000}, ready=False),
        Node("c", {GPU: 8, "cpu": 8000}, schedulable=False),
        Node("d", {GPU: 8, "cpu": 8000}, taints=(Taint("dedicated", "infra"),)),
    ]
    d = decide(snap(cluster, [gang("g", 2, 8)], config=SchedulerConfig(backfill="none")))
    assert d.binds == []
    tolerant = gang("t", 2, 8, tolerations=(Toleration("dedicated", "Equal", "infra", "NoSchedule"),))
    d = decide(snap(cluster, [tolerant]))
    assert sorted(bound(d)["t"].values()) == ["a", "d"]


def test_prefer_no_schedule_taint_is_avoided_unless_tolerated_or_needed():
    spot = Taint("spot", "", "PreferNoSchedule")
    cluster = [Node(name, {GPU: 8, "cpu": 64_000}, taints=(spot,) if name < "c" else ()) for name in "abc"]
    d = decide(snap(cluster, [gang("g", 1, 4)]))
    assert bound(d) == {"g": {"g-0": "c"}}
    tolerant = gang("t", 1, 4, tolerations=(Toleration("spot", "Exists"),))
    assert bound(decide(snap(cluster, [tolerant]))) == {"t": {"t-0": "a"}}  # best fit by name among equals
    assert sorted(bound(decide(snap(cluster, [gang("wide", 3, 8)])))["wide"].values()) == ["a", "b", "c"]


def test_node_selector_and_affinity():
    cluster = [
        Node("a", {GPU: 8, "cpu": 8000}, labels={"gpu": "h100", "zone": "x"}),
        Node("b", {GPU: 8, "cpu": 8000}, labels={"gpu": "a100", "zone": "x"}),
        Node("c", {GPU: 8, "cpu": 8000}, labels={"gpu": "h100"}),
    ]
    selected = gang("s", 1, 8, node_selector={"gpu": "h100"}, affinity=(NodeSelectorRequirement("zone", "Exists"),))
    excluded = gang("x", 1, 8, submit=1, affinity=(NodeSelectorRequirement("gpu", "NotIn", ("h100",)),))
    d = decide(snap(cluster, [selected, excluded]))
    assert bound(d) == {"s": {"s-0": "a"}, "x": {"x-0": "b"}}


def test_heterogeneous_members_and_every_resource_respected():
    cluster = [Node("a", {GPU: 8, "cpu": 4000, "rdma/rail0": 1}), Node("b", {GPU: 8, "cpu": 64000})]
    launcher = Member("launcher", {"cpu": 8000})
    workers = tuple(Member(f"w{i}", {GPU: 8, "cpu": 2000, "rdma/rail0": 1}) for i in range(1))
    mpi = Gang("mpi", "a", (launcher, *workers), max_runtime=60)
    d = decide(snap(cluster, [mpi]))
    assert bound(d)["mpi"] == {"w0": "a", "launcher": "b"}


def worker_and_loader(worker_cpu: int, loader_cpu: int = 120_000) -> Gang:
    """A worker (8 GPUs) and a data loader (no GPU, many CPUs): the greedy fill places the worker
    first, by free GPUs and then by name, so on a tie it may take the node the loader needs."""
    members = (Member("worker", {GPU: 8, "cpu": worker_cpu}), Member("loader", {"cpu": loader_cpu}))
    return Gang("g", "a", members, max_runtime=3600)


@pytest.mark.parametrize("big, small", [("A", "B"), ("B", "A"), ("pool-b", "pool-a")])
@pytest.mark.parametrize("preset", ["railforge", "strict_fifo"])
def test_a_gang_the_greedy_fill_misses_is_placed_whatever_the_node_names(big, small, preset):
    cluster = [Node(big, {GPU: 8, "cpu": 128_000}), Node(small, {GPU: 8, "cpu": 32_000})]
    d = decide(snap(cluster, [worker_and_loader(16_000)], config=SchedulerConfig.preset(preset)))
    assert bound(d) == {"g": {"worker": small, "loader": big}}


def test_a_gang_that_fits_only_on_nodes_freed_later_is_reserved_not_refused():
    # Real pool shapes: 8 GPUs with 96 or 64 CPUs. Once "busy" ends the gang fits (worker on the
    # 64-CPU node, loader on the 96-CPU one), so it is reserved, never declared unfit.
    cluster = [Node("a96", {GPU: 8, "cpu": 96_000}), Node("b64", {GPU: 8, "cpu": 64_000})]
    pair = worker_and_loader(16_000, loader_cpu=90_000)
    busy = running(gang("busy", 1, 1, runtime=600), ["b64"])
    d = decide(snap(cluster, [pair], [busy]))
    assert d.binds == [] and [(r.gang_name, r.start) for r in d.reservations] == [("g", 600.0)]
    assert not d.reasons["g"].startswith("does not fit even with nothing running")
    later = decide(snap(cluster, [pair], now=600.0))
    assert bound(later) == {"g": {"worker": "b64", "loader": "a96"}}


def test_unfit_is_declared_only_when_the_exact_search_proves_it(monkeypatch):
    # A 40-CPU worker fits only the 128-CPU node, which then has 88 CPUs left: the 120-CPU loader
    # fits nowhere, and the exhausted search proves it.
    cluster = [Node("A", {GPU: 8, "cpu": 128_000}), Node("B", {GPU: 8, "cpu": 32_000})]
    config = SchedulerConfig(backfill="none")
    d = decide(snap(cluster, [worker_and_loader(40_000)], config=config))
    assert d.binds == [] and d.reasons["g"].startswith("does not fit even with nothing running")
    # A search cut short by its budget proves nothing: the gang waits with a capacity reason.
    monkeypatch.setattr(placement, "EXACT_SEARCH_BUDGET", 1)
    d = decide(snap(cluster, [worker_and_loader(40_000)], config=config))
    assert d.binds == [] and d.reasons["g"] == (
        "needs 8 GPUs in pods of up to 8; the nodes it may use do not have each pod's GPU, CPU, "
        "memory and other requests free together"
    )
    assert bound(decide(snap(cluster, [worker_and_loader(16_000)], config=config))) == {}  # nor a placement


# -- admission and order ---------------------------------------------------------------------


def test_queue_limit_blocks_and_reason():
    queues = [Queue("vision", limit={GPU: 8, "cpu": 8000})]
    run = running(gang("r", 1, 8, queue="vision"), ["n00"])
    d = decide(snap(nodes(4), [gang("g", 1, 8, queue="vision")], [run], queues))
    assert d.binds == []
    assert d.reasons["g"] == "queue vision is at its limit of 8 GPUs"


def test_parent_limit_applies_to_children():
    queues = [Queue("org", limit={GPU: 12}), Queue("team", parent="org")]
    d = decide(snap(nodes(4), [gang("a", 1, 8, queue="team"), gang("b", 1, 8, queue="team", submit=1)], (), queues))
    assert list(bound(d)) == ["a"]
    assert d.reasons["b"] == "queue org is at its limit of 12 GPUs"


def test_admission_charges_the_required_members_and_min_resources_and_the_limit_trims_optional_ones():
    elastic = gang("elastic", 3, 8, min_member=1)  # one 8-GPU worker required, two optional
    one_domain = nodes(4, per_nvl=4)  # optional members join the domain the required ones use
    d = decide(snap(one_domain, [elastic], (), [Queue("a", limit={GPU: 16})]))
    assert sorted(bound(d)["elastic"]) == ["elastic-0", "elastic-1"]  # the third would pass the limit
    d = decide(snap(one_domain, [elastic], (), [Queue("a", quota={GPU: 8})]))
    assert len(bound(d)["elastic"]) == 3 and d.binds[0].borrowed  # holds 24 GPUs on a quota of 8
    d = decide(snap(nodes(1), [elastic], (), [Queue("a", quota={GPU: 8})]))
    assert bound(d) == {"elastic": {"elastic-0": "n00"}} and not d.binds[0].borrowed
    # min_resources raises what admission checks: 48 CPUs asked where the queue may hold 32
    hungry = gang("hungry", 1, 8, min_resources={"cpu": 48_000})
    d = decide(snap(nodes(4), [hungry], (), [Queue("a", limit={"cpu": 32_000})]))
    assert d.binds == [] and d.reasons["hungry"] == "needs 48 CPUs but queue a is limited to 32 CPUs"


def test_borrowing_is_marked():
    queues = [Queue("a", quota={GPU: 8, "cpu": 8000})]
    d = decide(snap(nodes(4), [gang("in", 1, 8), gang("out", 1, 8, submit=1)], (), queues))
    assert [(b.gang_name, b.borrowed) for b in d.binds] == [("in", False), ("out", True)]
    # where no queue declares a quota nothing is guaranteed, so nothing is borrowed: nobody could reclaim it
    unbounded = decide(snap(nodes(4), [gang("in", 1, 8, queue="b"), gang("out", 1, 8, queue="b")], (), [Queue("b")]))
    assert [(b.gang_name, b.borrowed) for b in unbounded.binds] == [("in", False), ("out", False)]
    # beside a queue that has one, a queue without is a borrower
    beside = decide(snap(nodes(4), [gang("other", 1, 8, queue="b")], (), [Queue("a", quota={GPU: 8}), Queue("b")]))
    assert [(b.gang_name, b.borrowed) for b in beside.binds] == [("other", True)]


def test_fair_order_serves_queue_furthest_below_share():
    cluster = nodes(2)
    run = running(gang("r", 1, 8, queue="rich"), ["n00"])
    pending = [gang("rich2", 1, 8, queue="rich", submit=0), gang("poor1", 1, 8, queue="poor", submit=5)]
    d = decide(snap(cluster, pending, [run], config=SchedulerConfig(backfill="none")))
    assert list(bound(d)) == ["poor1"]


def test_priority_then_age_within_queue_and_aging_bound():
    cluster = nodes(1)
    config = SchedulerConfig(backfill="none", aging_bound=1000)
    young_high = gang("high", 1, 8, submit=50, priority=5)
    old_low = gang("low", 1, 8, submit=10)
    d = decide(snap(cluster, [old_low, young_high], now=100, config=config))
    assert list(bound(d)) == ["high"]
    d = decide(snap(cluster, [old_low, young_high], now=1020, config=config))
    assert list(bound(d)) == ["low"]  # waited past the aging bound


@pytest.mark.parametrize(
    ("preset", "rest"),
    [("railforge", ["a-young", "b-young", "b-young2"]), ("strict_fifo", ["b-young", "b-young2", "a-young"])],
)
def test_aged_gangs_first_oldest_first_then_the_order_of_the_rest(preset, rest):
    config = replace(SchedulerConfig.preset(preset), aging_bound=1000)
    pending = [
        gang("a-young", 1, 8, queue="a", submit=2000),
        gang("b-young2", 1, 8, queue="b", submit=1600),
        gang("a-old", 1, 8, queue="a", submit=50, priority=-1),
        gang("b-young", 1, 8, queue="b", submit=1500),
        gang("b-old", 1, 8, queue="b", submit=10),
    ]
    queues = [Queue("a", quota={GPU: 4}), Queue("b", quota={GPU: 4})]
    snapshot = snap(nodes(1), pending, queues=queues, now=2100, config=config)
    state = CycleState(snapshot, *Scheduler().indexes_for(snapshot))
    recover.run(state)
    # fair order of the rest: equal shares, nothing held: a (the tie goes by name), then b twice
    assert [g.name for g in order.service_order(state, admit.index_waiting(state), 8)] == ["b-old", "a-old", *rest]


def test_usage_history_lowers_priority_of_heavy_user():
    config = SchedulerConfig(backfill="none")
    pending = [gang("heavy", 1, 8, queue="heavy"), gang("light", 1, 8, queue="light", submit=1)]
    d = decide(snap(nodes(1), pending, usage={"heavy": 1e9, "light": 0.0}, config=config))
    assert list(bound(d)) == ["light"]


def test_strict_fifo_blocks_everything_behind_head():
    config = SchedulerConfig.preset("strict_fifo")
    busy = [running(gang("busy", 1, 8), ["n02"])]
    d = decide(snap(nodes(3), [gang("big", 3, 8), gang("small", 1, 8, submit=1)], busy, config=config))
    assert d.binds == []
    assert d.reasons["small"].startswith("waiting behind gang big")
    best_effort = SchedulerConfig.preset("best_effort_fifo")
    d = decide(snap(nodes(3), [gang("big", 3, 8), gang("small", 1, 8, submit=1)], busy, config=best_effort))
    assert list(bound(d)) == ["small"] and d.reservations == []


@pytest.mark.parametrize("preset", ["railforge", "strict_fifo"])
def test_gang_larger_than_the_cluster_holds_nobody_up(preset):
    # 24 GPUs on two 8-GPU nodes can never fit: the gang takes no reservation (the next blocked
    # gang gets it), reclaims nothing, does not stop a strict order, and says what it lacks
    busy = [running(gang("busy", 1, 4, queue="b"), ["n00"], borrowed=True)]
    pending = [
        gang("huge", 3, 8),
        gang("pair", 2, 8, submit=1),
        gang("small", 1, 4, submit=2, runtime=60),
        gang("huge2", 3, 8, submit=3),
    ]
    queues = [Queue("a", quota={GPU: 16}), Queue("b")]
    d = decide(snap(nodes(2), pending, busy, queues=queues, config=SchedulerConfig.preset(preset)))
    for name in ("huge", "huge2"):  # huge2 is not told it waits behind pair under a strict order
        assert d.reasons[name] == (
            "does not fit even with nothing running: needs 24 GPUs; the schedulable nodes have 16 in all"
        )
    assert d.evictions == []
    if preset == "railforge":
        assert [r.gang_name for r in d.reservations] == ["pair"]
        assert d.reasons["pair"].startswith("reserved to start at 1970-01-01T01:00:00Z")
        assert list(bound(d)) == ["small"]  # ends before pair's start: backfills on n01
    else:
        assert d.binds == [] and d.reasons["small"].startswith("waiting behind gang pair")


@pytest.mark.parametrize("preset", ["railforge", "strict_fifo"])
def test_gang_of_an_undeclared_queue_waits_and_holds_nobody_up(preset):
    # "vison" is a typo for "vision", which is at its limit: the gang may not escape the limit by
    # naming a queue nobody declared. It takes no reservation, does not stop a strict order, and
    # still fails at its schedule timeout. A running gang of an undeclared queue (one deleted while
    # it ran) keeps its GPUs.
    queues = [Queue("vision", limit={GPU: 8}), Queue("speech")]
    busy = [running(gang("held", 1, 8, queue="vision"), ["n00"]), running(gang("orphan", 1, 4, queue="old"), ["n01"])]
    pending = [
        gang("typo", 1, 8, queue="vison"),
        gang("typo-timed", 1, 8, queue="vison", schedule_timeout=50),
        gang("capped", 1, 8, queue="vision", submit=1),
        gang("speech", 1, 4, queue="speech", submit=2),
    ]
    d = decide(snap(nodes(2), pending, busy, queues=queues, config=SchedulerConfig.preset(preset)))
    assert d.reasons["typo"] == (
        "queue vison is not declared; it waits until the queue is declared or the gang names a declared one"
    )
    assert [f.gang_name for f in d.failures] == ["typo-timed"]
    assert d.reasons["capped"] == "queue vision is at its limit of 8 GPUs"
    assert list(bound(d)) == ["speech"] and bound(d)["speech"] == {"speech-0": "n01"}
    assert d.reservations == [] and d.evictions == []
    declared = decide(snap(nodes(2), pending[:1], busy[:1], queues=[*queues, Queue("vison")]))
    assert bound(declared) == {"typo": {"typo-0": "n01"}}


def test_unfit_reasons_name_what_is_missing():
    leaf = TopologyConstraint("leaf", required=True)
    pending = [
        gang("wide", 5, 8, topology=leaf),  # 40 GPUs in one leaf of 4 nodes (32 GPUs)
        gang("fat", 1, 16),  # a 16-GPU pod on 8-GPU nodes
        gang("picky", 1, 8, node_selector={"pool": "h200"}),
        replace(gang("cpu", 1, 1), members=(Member("cpu-0", {GPU: 1, "cpu": 128_000}),)),  # nodes have 64
    ]
    d = decide(snap(nodes(8), pending, config=SchedulerConfig(backfill="none")))
    assert d.binds == []
    assert d.reasons["wide"].endswith("needs 40 GPUs within one leaf; the largest leaf has 32 in all")
    assert d.reasons["fat"].endswith("needs 1 pod of 16 GPUs; no node has that much (the largest has 8)")
    assert d.reasons["picky"].endswith(
        "needs 8 GPUs; the nodes it may use (its node selector pool=h200 rules out 8 nodes) have 0 in all"
    )
    assert d.reasons["cpu"].endswith("needs 1 pod of 128 CPUs; no node has that much (the largest has 64 CPUs)")
    assert not decide(snap([], [gang("any", 1, 1)])).binds  # no schedulable node at all


def test_an_unfit_pods_missing_cpu_or_extended_resource_is_named():
    cluster = [Node(f"n{i}", {GPU: 8, "cpu": 64_000, "rdma/rail0": 1}) for i in range(2)]
    rails = Gang("rails", "a", (Member("rails-0", {GPU: 8, "rdma/rail0": 2}),), max_runtime=60)
    cpus = Gang("cpus", "a", tuple(Member(f"cpus-{i}", {GPU: 1, "cpu": 40_000}) for i in range(3)), max_runtime=60)
    # each pod alone fits, but no node holds a 40-CPU worker beside the 120-CPU loader
    together = worker_and_loader(40_000)
    wide = [Node("A", {GPU: 8, "cpu": 128_000}), Node("B", {GPU: 8, "cpu": 32_000})]
    d = decide(snap(cluster, [rails, cpus]))
    assert (
        d.reasons["rails"]
        == f"{UNFIT}needs 1 pod of 2 rdma/rail0; no node has that much (the largest has 1 rdma/rail0)"
    )
    assert d.reasons["cpus"] == f"{UNFIT}needs 3 pods of 40 CPUs; the schedulable nodes have room for 2"
    assert decide(snap(wide, [together])).reasons["g"] == (
        f"{UNFIT}the schedulable nodes cannot hold its pods' CPU, GPU requests together"
    )


def test_a_pod_larger_than_any_node_is_told_so_before_any_rule_that_rules_nodes_out():
    control_plane = Node("cp", {GPU: 0, "cpu": 8000}, taints=(Taint("node-role.kubernetes.io/control-plane", ""),))
    cluster = [control_plane, *nodes(2, gpus=2)]
    d = decide(snap(cluster, [gang("wide", 2, 3)]))
    assert d.reasons["wide"] == f"{UNFIT}needs 2 pods of 3 GPUs; no node has that much (the largest has 2)"
    assert d.reasons["wide"].code == "capacity.never-fits.pods"


def test_node_selector_affinity_and_taints_get_reasons_naming_which():
    cluster = [
        Node("a", {GPU: 8, "cpu": 8000}, labels={"pool": "x", "zone": "1"}),
        Node("b", {GPU: 8, "cpu": 8000}, labels={"pool": "y", "zone": "1"}),
        Node("c", {GPU: 8, "cpu": 8000}, labels={"pool": "x"}, taints=(Taint("dedicated", "infra"),)),
    ]
    busy = running(gang("busy", 1, 8), ["a"])
    pending = [
        gang("selector", 1, 8, node_selector={"pool": "z"}),
        gang("affinity", 1, 8, affinity=(NodeSelectorRequirement("zone", "In", ("2",)),)),
        gang("tainted", 1, 8, node_selector={"pool": "x"}),  # a is busy; c has a taint it does not tolerate
    ]
    d = decide(snap(cluster, pending, [busy], config=SchedulerConfig(backfill="none")))
    assert d.reasons["selector"] == (
        f"{UNFIT}needs 8 GPUs; the nodes it may use (its node selector pool=z rules out 3 nodes; "
        "a taint it does not tolerate rules out 1 node) have 0 in all"
    )
    assert d.reasons["affinity"] == (
        f"{UNFIT}needs 8 GPUs; the nodes it may use (its node affinity (zone In 2) rules out 3 nodes; "
        "a taint it does not tolerate rules out 1 node) have 0 in all"
    )
    assert d.reasons["tainted"] == (
        "needs 8 GPUs on the nodes it may use (its node selector pool=x rules out 1 node; "
        "a taint it does not tolerate rules out 1 node); those have 0 free"
    )


def test_a_blocked_head_names_its_nodes_and_leaf_and_the_gangs_it_waits_for():
    cluster = nodes(4)  # NVLink domains n00-n01 and n02-n03, one leaf
    run = [
        running(gang("a", 1, 8, runtime=600), ["n00"]),
        running(gang("b", 1, 8, runtime=1200), ["n01"]),
        running(gang("c", 2, 8, runtime=5000), ["n02", "n03"]),
    ]
    d = decide(snap(cluster, [gang("head", 2, 8)], run))
    assert [(r.nodes, r.start) for r in d.reservations] == [(("n00", "n01"), 1200.0)]
    assert (
        d.reasons["head"] == "reserved to start at 1970-01-01T00:20:00Z on n00, n01 (nvlink nvl0), when gangs a, b end"
    )


def test_capacity_reasons_name_the_short_request_and_count_only_the_nodes_a_gang_may_use():
    # Each node: 8 GPUs and 16 CPUs, of which "hog" holds 4 GPUs and 12 CPUs (4 GPUs, 4 CPUs free).
    cluster = [Node(f"n{i}", {GPU: 8, "cpu": 16_000}) for i in range(2)]
    hog = Gang("hog", "a", tuple(Member(f"hog-{i}", {GPU: 4, "cpu": 12_000}) for i in range(2)), max_runtime=3600)

    def pods(name, count, gpus, cpu, runtime, submit):
        members = tuple(Member(f"{name}-{i}", {GPU: gpus, "cpu": cpu}) for i in range(count))
        return Gang(name, "a", members, submit_time=submit, max_runtime=runtime)

    pending = [
        pods("big", 2, 8, 1000, 3600, 0),  # 16 GPUs: reserved at +58m
        pods("cpu-total", 2, 1, 6000, 60, 1),  # 12 CPUs of the 8 free; would end before the reservation
        pods("cpu-pod", 1, 1, 6000, 60, 2),  # 6 CPUs, but no node has more than 4 free
        pods("long", 1, 4, 1000, 7200, 3),  # fits now, but would run into the reservation
    ]
    d = decide(snap(cluster, pending, [running(hog, ["n0", "n1"])]))
    assert d.binds == [] and [r.gang_name for r in d.reservations] == ["big"]
    assert d.reasons["cpu-total"] == "needs 12 CPUs; the cluster has 8 CPUs free"
    assert d.reasons["cpu-pod"] == (
        "needs 1 pod of 6 CPUs; the nodes it may use have room for 0 (the most free on one node is 4 CPUs)"
    )
    assert d.reasons["long"].startswith("blocked behind reservation of gang big (starts at 1970-01-01T01:00:00Z)")
    # A required leaf counts only the nodes the gang's selector accepts.
    pools = [
        Node(f"m{i}", {GPU: 8, "cpu": 64_000}, labels={"pool": "ab"[i // 4]}, topology=("s0", f"leaf{i // 2}"))
        for i in range(6)
    ]
    busy = [running(gang(f"busy{i}", 1, 8), [f"m{i}"]) for i in (1, 3)]
    picky = gang("picky", 2, 8, node_selector={"pool": "a"}, topology=TopologyConstraint("leaf", required=True))
    d = decide(snap(pools, [picky], busy, config=SchedulerConfig(backfill="none")))
    assert d.reasons["picky"] == "needs 16 GPUs within one leaf; the best leaf has 8 free"


def test_required_topology_level_the_scheduler_does_not_know_is_refused():
    # a typo in a required level must not be dropped silently (the gang would spread anywhere)
    typo = gang("typo", 2, 8, topology=TopologyConstraint("leafs", required=True))
    loose = gang("loose", 2, 8, submit=1, topology=TopologyConstraint("leafs", required=False))
    d = decide(snap(nodes(4), [typo, loose]))
    assert list(bound(d)) == ["loose"] and d.reservations == []
    assert d.reasons["typo"] == (
        "requires topology level 'leafs', which is not one of the scheduler's levels (spine, leaf, nvlink)"
    )


def test_sjf_oracle_orders_by_true_runtime():
    config = SchedulerConfig.preset("sjf_oracle")
    pending = [gang("long", 1, 8, oracle_runtime=500), gang("short", 1, 8, submit=9, oracle_runtime=5)]
    assert list(bound(decide(snap(nodes(1), pending, config=config)))) == ["short"]


# -- backfill --------------------------------------------------------------------------------


def test_easy_reservation_and_backfill_rules():
    cluster = nodes(4)
    run = running(gang("r", 2, 8, runtime=7200), ["n00", "n01"], start=0)
    big = gang("big", 4, 8, submit=1)
    fits_before = gang("short", 1, 8, submit=2, runtime=3000)
    too_long = gang("long", 1, 8, submit=3, runtime=90000)
    d = decide(snap(cluster, [big, fits_before, too_long], [run], now=100))
    assert [(r.gang_name, r.start) for r in d.reservations] == [("big", 7200)]
    assert list(bound(d)) == ["short"]
    assert (
        d.reasons["big"]
        == "reserved to start at 1970-01-01T02:00:00Z on n00, n01, n02, n03 (leaf leaf0), when gang r ends"
    )
    assert d.reasons["long"].startswith("blocked behind reservation of gang big (starts at 1970-01-01T02:00:00Z)")


def test_backfill_outside_reserved_nodes_may_run_long():
    cluster = nodes(4)
    run = running(gang("r", 2, 8, runtime=7200), ["n00", "n01"])
    big = gang("big", 3, 8, submit=1)
    other = gang("other", 1, 8, submit=2, runtime=1e6)
    d = decide(snap(cluster, [big, other], [run]))
    reserved = set(d.reservations[0].nodes)
    assert len(reserved) == 3
    assert set(bound(d)["other"].values()).isdisjoint(reserved)


def test_reservation_holds_only_what_the_gang_needs():
    # Two 8-GPU nodes; n00 has 1 GPU free until 7200 and n01 is full until 3600. The blocked 2-GPU
    # head gang is reserved 2 GPUs and the CPU it asks for on n01, not the whole node.
    cluster = nodes(2)
    run = [
        running(gang("r0", 1, 7, runtime=7200), ["n00"]),
        running(gang("r1", 1, 8, runtime=3600), ["n01"]),
    ]
    head = gang("head", 1, 2, submit=1)
    long = gang("long", 1, 4, submit=2, runtime=1e6)
    later = gang("later", 1, 4, submit=3, runtime=1e6)
    d = decide(snap(cluster, [head, long, later], run, config=SchedulerConfig(order="fifo")))
    (reservation,) = d.reservations
    assert (reservation.gang_name, reservation.nodes, reservation.start) == ("head", ("n01",), 3600)
    assert reservation.held == (("n01", (("cpu", 1000), (GPU, 2))),)
    assert list(bound(d)) == []  # nothing is free now on n01; n00 has 1 GPU


def test_backfill_beside_a_partial_reservation():
    cluster = nodes(2)
    run = [
        running(gang("r0", 1, 4, runtime=7200), ["n00"]),  # n00: 4 GPUs free now
        running(gang("r1", 1, 8, runtime=3600), ["n01"]),
    ]
    head = gang("head", 1, 8, submit=1)  # needs a whole node: n01 at 3600
    small = gang("small", 1, 2, submit=2, runtime=1e6)
    d = decide(snap(cluster, [head, small], run))
    assert [(r.gang_name, r.nodes) for r in d.reservations] == [("head", ("n01",))]
    assert bound(d)["small"] == {"small-0": "n00"}
    big_head = gang("head", 1, 6, submit=1)  # fits on n00 at 7200 or n01 at 3600: n01 is reserved 6
    d = decide(snap(cluster, [big_head, small], run))
    assert [(r.gang_name, r.nodes, r.start) for r in d.reservations] == [("head", ("n01",), 3600)]
    assert list(bound(d)) == ["small"]


def test_reservation_holds_nodes_busy_now_over_idle_ones_that_free_no_later():
    # n00 has 4 GPUs free now, n01 none; both are free at 3600. The head is reserved on n01, so
    # the long 4-GPU gang can use n00's idle GPUs now (holding n00 would idle them until 3600).
    run = [
        running(gang("r0", 1, 4, runtime=3600), ["n00"]),
        running(gang("r1", 1, 8, runtime=3600), ["n01"]),
    ]
    head = gang("head", 1, 8, submit=1)
    long = gang("long", 1, 4, submit=2, runtime=1e6)
    d = decide(snap(nodes(2, per_nvl=1), [head, long], run))
    assert [(r.gang_name, r.nodes, r.start) for r in d.reservations] == [("head", ("n01",), 3600)]
    assert bound(d)["long"] == {"long-0": "n00"}
    # Within one domain: a two-node head is reserved the two busy nodes, not the idle n00.
    run = [running(gang("r1", 1, 8, runtime=3600), ["n01"]), running(gang("r2", 1, 8, runtime=3600), ["n02"])]
    head = gang("head", 2, 8, submit=1)
    long = gang("long", 1, 8, submit=2, runtime=1e6)
    d = decide(snap(nodes(3, per_nvl=1), [head, long], run))
    assert [(r.gang_name, r.nodes, r.start) for r in d.reservations] == [("head", ("n01", "n02"), 3600)]
    assert bound(d)["long"] == {"long-0": "n00"}


def test_reservation_kept_while_the_same_gangs_run_follows_the_clock():
    # The running index keeps the head's earliest start between calls while the same gangs (and
    # nodes) stay: later calls get it at their own time, which is "now" once r0 has overrun its
    # expected end (3600). The 4-GPU gang backfills beside the reservation every time.
    cluster = tuple(nodes(2, per_nvl=1))
    run = [running(gang("r0", 1, 8, runtime=3600), ["n00"]), running(gang("r1", 1, 4, runtime=7200), ["n01"])]
    head = gang("head", 1, 8, submit=1)
    short = gang("short", 1, 4, submit=2, runtime=600)
    for now, start in ((100.0, 3600.0), (3000.0, 3600.0), (5000.0, 5000.0)):
        d = decide(snap(cluster, [head, short], run, now=now))
        assert [(r.gang_name, r.nodes, r.start) for r in d.reservations] == [("head", ("n00",), start)]
        assert bound(d) == {"short": {"short-0": "n01"}}
        # the words name the start, not the time to it: the same in every pass until r0 is past its max runtime
        when = (
            "at 1970-01-01T01:00:00Z" if start > now else "as soon as its nodes are free (past the max runtime ahead)"
        )
        assert d.reasons["head"] == f"reserved to start {when} on n00 (leaf leaf0), when gang r0 ends"


def test_conservative_reserves_first_k_blocked_gangs():
    cluster = nodes(4)
    run = running(gang("r", 4, 8, runtime=1000), ["n00", "n01", "n02", "n03"])
    pending = [gang("a", 4, 8, submit=1, runtime=500), gang("b", 2, 8, submit=2), gang("c", 1, 8, submit=3)]
    config = SchedulerConfig(backfill="conservative", reservation_depth=2)
    d = decide(snap(cluster, pending, [run], now=0, config=config))
    assert [(r.gang_name, r.start) for r in d.reservations] == [("a", 1000), ("b", 1500)]
    easy = decide(snap(cluster, pending, [run], now=0))
    assert [r.gang_name for r in easy.reservations] == ["a"]


def test_conservative_names_the_reservation_that_blocks_a_gang():
    # "first" holds n00 from 1000; "second" holds n01 and n02 from 3000; "small" would fit on n02's
    # four free GPUs now, but runs past 3000, when "second" needs them.
    cluster = nodes(3)
    run = [
        running(gang("r0", 1, 8, runtime=1000), ["n00"]),
        running(gang("r1", 1, 8, runtime=2000), ["n01"]),
        running(gang("r2", 1, 4, runtime=3000), ["n02"]),
    ]
    pending = [
        gang("first", 1, 8, submit=1, runtime=10_000),
        gang("second", 2, 8, submit=2),
        gang("small", 1, 4, submit=3, runtime=5000),
    ]
    config = SchedulerConfig(backfill="conservative", reservation_depth=2)
    d = decide(snap(cluster, pending, run, now=0, config=config))
    assert [(r.gang_name, r.start) for r in d.reservations] == [("first", 1000), ("second", 3000)]
    assert d.reasons["small"].startswith("blocked behind reservation of gang second (starts at 1970-01-01T00:50:00Z)")


def test_a_holder_starts_where_its_previous_reservation_put_it():
    # Node shapes the greedy start fill would use differently: "wide" on n01 alone (the emptiest
    # leaf first) would leave "next" too little CPU there; its reservation put its pods apart.
    cluster = (
        Node("n00", {GPU: 4, "cpu": 64}, topology=("s0", "leaf0", "nvl0")),
        Node("n01", {GPU: 4, "cpu": 64}, topology=("s0", "leaf1", "nvl1")),
    )
    wide = Gang("wide", "a", (Member("wide-0", {GPU: 0, "cpu": 40}), Member("wide-1", {GPU: 0, "cpu": 20})))
    promise = Reservation("wide", ("n00", "n01"), 0.0, placement=(("wide-0", "n00"), ("wide-1", "n01")))
    d = decide(Snapshot(0.0, cluster, (Queue("a"),), (wide,), (), reservations=(promise,)))
    assert bound(d) == {"wide": {"wide-0": "n00", "wide-1": "n01"}}
    cold = decide(Snapshot(0.0, cluster, (Queue("a"),), (wide,), ()))
    assert bound(cold)["wide"] != bound(d)["wide"]


# -- reclaim and failures --------------------------------------------------------------------


def test_reclaim_evicts_whole_borrowed_gangs_lowest_priority_least_progress_first():
    queues = [Queue("owner", quota={GPU: 16}), Queue("borrower")]
    old = running(gang("old", 1, 8, queue="borrower", runtime=DAY), ["n00"], start=0, borrowed=True)
    new = running(gang("new", 1, 8, queue="borrower", runtime=DAY), ["n01"], start=5000, borrowed=True)
    fresh = running(gang("fresh", 1, 8, queue="borrower", runtime=DAY), ["n02"], start=9900, borrowed=True)
    pending = [gang("claim", 1, 8, queue="owner")]
    d = decide(snap(nodes(3), pending, [old, new, fresh], queues, now=10000))
    assert [e.gang_name for e in d.evictions] == ["new"]  # fresh is under the minimum runtime
    assert bound(d)["claim"] == {"claim-0": "n01"}
    assert d.evictions[0].reason == "reclaimed by queue owner (within its quota) for gang claim"


def test_no_reclaim_for_borrowing_gang():
    queues = [Queue("borrower")]
    victim = running(gang("v", 1, 8, queue="borrower"), ["n00"], borrowed=True)
    d = decide(snap(nodes(1), [gang("g", 1, 8, queue="other")], [victim], queues, now=10000))
    assert d.evictions == []


def test_member_failure_restarts_whole_gang_with_backoff():
    failed = running(gang("g", 2, 8, restart_count=2), ["n00", "n01"], failed_members=("g-1",))
    d = decide(snap(nodes(2), (), [failed], now=1000))
    assert [(r.gang_name, r.not_before) for r in d.restarts] == [("g", 1000 + 120)]
    assert "member g-1 failed" in d.restarts[0].reason


def test_node_loss_fails_gang_by_policy_and_frees_capacity():
    cluster = [Node("n00", {GPU: 8, "cpu": 8000}, ready=False), Node("n01", {GPU: 8, "cpu": 8000})]
    lost = running(gang("g", 2, 8), ["n00", "n01"])
    d = decide(snap(cluster, [gang("next", 1, 8)], [lost], config=SchedulerConfig(failure_policy="fail")))
    assert [f.gang_name for f in d.failures] == ["g"]
    assert "node n00" in d.failures[0].reason
    assert bound(d) == {"next": {"next-0": "n01"}}


def test_no_execute_taint_restarts_the_gangs_on_the_node_that_do_not_tolerate_it():
    drain = Taint("maintenance", "", "NoExecute")
    cluster = [replace(n, taints=(drain,)) if n.name == "n00" else n for n in nodes(3)]
    tolerant = gang("tolerant", 1, 4, tolerations=(Toleration("maintenance", "Exists", effect="NoExecute"),))
    run = [running(gang("g", 2, 4), ["n00", "n01"]), running(tolerant, ["n00"]), running(gang("away", 1, 8), ["n02"])]
    d = decide(snap(cluster, (), run, now=1000))
    assert [(r.gang_name, r.reason) for r in d.restarts] == [
        (
            "g",
            "node n00 of member g-0 has taint maintenance:NoExecute, which the gang does not tolerate; "
            "restarting the whole gang",
        )
    ]
    assert d.failures == [] and d.evictions == []


def test_max_restarts_turns_restart_into_failure():
    failed = running(gang("g", 1, 8, restart_count=3), ["n00"], failed_members=("g-0",))
    d = decide(snap(nodes(1), (), [failed], config=SchedulerConfig(max_restarts=3)))
    assert [f.gang_name for f in d.failures] == ["g"]


@pytest.mark.parametrize("restarts, owner_limit", [(0, 0), (2, 2)])
def test_a_gang_whose_owner_allows_no_more_restarts_fails_with_why(restarts, owner_limit):
    failed = running(
        gang("g", 1, 8, restart_count=restarts, owner_max_restarts=owner_limit), ["n00"], failed_members=("g-0",)
    )
    d = decide(snap(nodes(1), (), [failed]))
    assert d.restarts == []
    plural = "" if owner_limit == 1 else "s"
    assert [(f.gang_name, f.reason) for f in d.failures] == [
        (
            "g",
            f"member g-0 failed; not restarted: its owner counts a restart's removed pods against its own limit, "
            f"which allows {owner_limit} restart{plural} ({restarts} done); the failure is left to it",
        )
    ]


def test_a_gang_whose_owner_ends_the_job_by_its_own_rule_fails_with_that_rule():
    why = "Job g's podFailurePolicy ends the job on pod g-0 (FailJob)"
    ended = gang("g", 1, 8, restart_count=1, owner_max_restarts=1, owner_limit_reason=why)
    d = decide(snap(nodes(1), (), [running(ended, ["n00"], failed_members=("g-0",))]))
    assert [(f.gang_name, f.reason) for f in d.failures] == [
        ("g", f"member g-0 failed; not restarted: {why}; the failure is left to it")
    ]


def test_a_gang_within_its_owners_limit_is_restarted():
    failed = running(gang("g", 1, 8, restart_count=1, owner_max_restarts=2), ["n00"], failed_members=("g-0",))
    d = decide(snap(nodes(1), (), [failed], now=10))
    assert [r.gang_name for r in d.restarts] == ["g"] and d.failures == []


def test_backoff_and_schedule_timeout():
    waiting = gang("w", 1, 8, not_before=400)
    late = gang("late", 1, 8, submit=0, schedule_timeout=50)
    d = decide(snap(nodes(1), [waiting, late], now=100))
    assert d.binds == []
    assert d.reasons["w"] == "restarting after a failure; backoff ends at 1970-01-01T00:06:40Z"
    assert [(f.gang_name, f.reason) for f in d.failures] == [
        ("late", "not scheduled within its schedule timeout of 50s")
    ]
    # A restarted gang's timeout counts from the end of its backoff, not from its submission.
    restarted = gang("restarted", 1, 8, submit=0, schedule_timeout=50, restart_count=1, not_before=80)
    d = decide(snap(nodes(1), [restarted, late], now=100))
    assert bound(d) == {"restarted": {"restarted-0": "n00"}}
    assert [f.gang_name for f in d.failures] == ["late"]
    # A gang that never failed has no backoff, whatever the clock's origin.
    assert bound(decide(snap(nodes(1), [gang("fresh", 1, 8, submit=-50)], now=-10))) == {"fresh": {"fresh-0": "n00"}}


def test_reason_when_cluster_is_short_and_duration_format():
    busy = [running(gang("busy", 1, 4), ["n00"])]
    d = decide(snap(nodes(2), [gang("g", 2, 8, runtime=None)], busy, config=SchedulerConfig(backfill="none")))
    assert d.reasons["g"] == "needs 16 GPUs; the cluster has 12 free"
    assert duration(7980) == "2h13m" and duration(45) == "45s" and duration(90000) == "1d1h"


def test_same_input_same_output():
    cluster = nodes(8)
    pending = [gang(f"g{i}", 1 + i % 3, 4 + 4 * (i % 2), queue="ab"[i % 2], submit=i) for i in range(12)]
    first = decide(snap(cluster, pending))
    assert decide(snap(cluster, list(reversed(pending)))) == first


@pytest.mark.parametrize(("team_quota", "evicted"), [(8, ["t1"]), (12, [])])
def test_reclaim_keeps_the_victim_queue_at_least_as_served_as_the_claimer(team_quota, evicted):
    # "team" holds 16 GPUs in two borrowed gangs; "owner" (quota 8) holds none and claims 8, which
    # puts it at 8/8 = 1.0 of its quota. Evicting one team gang leaves team at 8/quota: 1.0 with a
    # quota of 8 (as served as the claimer: allowed), 0.67 with 12 (it would then be owed GPUs and
    # reclaim in turn: refused, the claim waits).
    queues = [Queue("owner", quota={GPU: 8}), Queue("team", quota={GPU: team_quota})]
    held = [
        running(gang(f"t{i}", 1, 8, queue="team", runtime=DAY), [f"n{i:02d}"], start=1000 * i, borrowed=True)
        for i in range(2)
    ]
    d = decide(snap(nodes(2), [gang("claim", 1, 8, queue="owner")], held, queues, now=10000))
    assert [e.gang_name for e in d.evictions] == evicted  # least progress first
    assert bool(d.binds) == bool(evicted)
    if not evicted:
        assert d.reasons["claim"].endswith(
            "; not reclaiming: the borrowing queues would end up less served (held / quota) than this one"
        )


def test_backfill_tries_shortest_estimate_first_after_the_reservation():
    cluster = nodes(2)
    busy = running(gang("busy", 1, 8, runtime=5000), ["n00"])
    head = gang("head", 2, 8, submit=0)  # needs both nodes: reserved at t=5000
    long_small = gang("long", 1, 4, submit=1, runtime=4000)
    short_small = gang("short", 1, 8, submit=2, runtime=1000)
    d = decide(snap(cluster, [head, long_small, short_small], [busy], now=0))
    assert [(r.gang_name, r.start) for r in d.reservations] == [("head", 5000)]
    assert bound(d) == {"short": {"short-0": "n01"}}  # both fit before 5000; the shorter goes first
    fair = decide(
        snap(cluster, [head, long_small, short_small], [busy], now=0, config=SchedulerConfig(backfill_order="fair"))
    )
    assert bound(fair) == {"long": {"long-0": "n01"}}  # age order: the older gang takes the node


@pytest.mark.parametrize(
    ("backfill_order", "held", "started"),
    [
        ("shortest", 8, "ahead-short"),
        ("over_share_last", 8, "behind-long"),  # "ahead" holds its share and was served faster: it backfills last
        ("over_share_last", 4, "ahead-short"),  # ahead of the rate too, but holding less than its share
    ],
)
def test_over_share_last_backfills_the_queues_ahead_of_their_share_last(backfill_order, held, started):
    cluster = nodes(2)
    # "ahead" runs a gang on one node to 5,000 s; "behind" runs none and waits with a 16-GPU head, reserved from
    # then on. Each also waits with an 8-GPU gang that fits the other node until then. Shares: 8 GPUs each.
    busy = [running(gang("ahead-run", 1, held, queue="ahead", runtime=5000), ["n00"])]
    head = gang("behind-head", 2, 8, queue="behind", submit=0)
    ahead_short = gang("ahead-short", 1, 8, queue="ahead", submit=1, runtime=1000)
    behind_long = gang("behind-long", 1, 8, queue="behind", submit=2, runtime=4000)
    config = SchedulerConfig(backfill_order=backfill_order)
    d = decide(snap(cluster, [head, ahead_short, behind_long], busy, now=0, config=config))
    assert [r.gang_name for r in d.reservations] == ["behind-head"]
    assert set(bound(d)) == {started}


@pytest.mark.parametrize(("runtime", "evicted"), [(7000, []), (20_000, ["b"])])
def test_reclaim_destroys_at_most_the_work_it_saves(runtime, evicted):
    # The borrower has run 8 GPUs x 4000 s. Without reclaim the claim (8 GPUs) starts when the
    # borrower ends: after 3000 s when its run is 7000 s long (saves less than it destroys: waits),
    # after 16,000 s when it is 20,000 s long (evicts).
    queues = [Queue("owner", quota={GPU: 8}), Queue("borrower")]
    victim = running(gang("b", 1, 8, queue="borrower", runtime=runtime), ["n00"], start=6000, borrowed=True)
    claim = gang("claim", 1, 8, queue="owner", submit=9000)
    d = decide(snap(nodes(1), [claim], [victim], queues, now=10000))
    assert [e.gang_name for e in d.evictions] == evicted
    if not evicted:
        assert d.reasons["claim"] == (
            "reserved to start at 1970-01-01T03:36:40Z on n00, when gang b ends; not reclaiming: "
            "evicting the borrowers would destroy more work than the wait it saves"
        )
    unbounded = SchedulerConfig(reclaim_cost_limit=None)
    d = decide(snap(nodes(1), [claim], [victim], queues, now=10000, config=unbounded))
    assert [e.gang_name for e in d.evictions] == ["b"]


def test_a_gang_backfilling_past_the_reservation_records_whom_it_passed():
    busy = running(gang("busy", 1, 8, runtime=5000), ["n00"])
    pending = [gang("first", 1, 4, submit=0), gang("head", 2, 8, submit=1), gang("small", 1, 4, submit=2)]
    d = decide(snap(nodes(2), pending, [busy], now=0))
    assert [r.gang_name for r in d.reservations] == ["head"]
    assert {b.gang_name: b.backfilled_past for b in d.binds} == {"first": None, "small": "head"}


def preemption_case(victim_queue="a", victim_end=6000.0, victim_start=1000.0, other_end=None, config=None):
    # The head needs two nodes. It reserved them while a long run held n00; "bf" then backfilled
    # onto n01 past it, its estimate ending by the reserved start. The long run has ended early.
    # With ``other_end``, a third node's gang ends then and gives the head its second node.
    victim = gang("bf", 1, 8, queue=victim_queue, runtime=victim_end - victim_start)
    run = [running(victim, ["n01"], start=victim_start, backfilled_past="head")]
    if other_end is not None:
        run.append(running(gang("other", 1, 8, runtime=other_end), ["n02"]))
    cluster = nodes(2 if other_end is None else 3)
    return decide(snap(cluster, [gang("head", 2, 8)], run, now=2000, config=config))


# Without backfill (the scheduler's config changed while "bf" ran) the head makes no reservation,
# and the pass may stop before trying it once nothing fits; it must still get its turn to preempt.
@pytest.mark.parametrize("config", [None, SchedulerConfig.preset("best_effort_fifo")], ids=["easy", "no backfill"])
def test_reservation_holder_preempts_what_backfilled_past_it_when_it_could_start_now(config):
    d = preemption_case(config=config)
    assert [(e.gang_name, e.cause) for e in d.evictions] == [("bf", "preempt")]
    assert d.evictions[0].reason == (
        "preempted for gang head, whose reservation it started past: that gang can start now"
    )
    assert bound(d) == {"head": {"head-0": "n00", "head-1": "n01"}}


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ({"config": SchedulerConfig(preempt_backfill=False)}, "switched off"),
        ({"victim_queue": "b"}, "another queue's gang: fair share and reclaim govern it"),
        ({"victim_start": 1500.0}, "under its minimum runtime"),
        # the head starts at 6000 on n00 and n02 anyway; "bf" runs on past it: a longer run on
        # another node, which holds nothing the reservation was promised
        ({"victim_end": 90_000.0, "other_end": 6000.0}, "ends after the head's start"),
        # 8 GPUs x 1900 s lost would buy the head (16 GPUs) only 15 s: it waits instead
        ({"victim_end": 2015.0, "victim_start": 100.0}, "costs more than the wait it saves"),
    ],
)
def test_preemption_is_declined(case, reason):
    d = preemption_case(**case)
    assert d.evictions == [] and d.binds == [], reason
    assert [r.gang_name for r in d.reservations] == ["head"]
    if reason.startswith("costs"):  # a candidate spared by the bound: the reason says so
        assert d.reasons["head"] == (
            "reserved to start at 1970-01-01T00:33:35Z on n00, n01 (nvlink nvl0), when gang bf ends; not preempting: "
            "evicting the gangs that backfilled past it would destroy more work than the wait it saves"
        )
    else:  # no candidate at all: nothing to report
        assert "not preempting" not in d.reasons["head"]


def test_preemption_that_would_not_make_room_is_declined_with_its_reason():
    # "bf" backfilled past the head, but the head also needs n00, busy until 6000 with a gang that
    # did not pass it: evicting "bf" alone would not let the head start.
    bf = running(gang("bf", 1, 8, runtime=4000), ["n01"], start=1000, backfilled_past="head")
    busy = running(gang("busy", 1, 8, runtime=6000), ["n00"])
    d = decide(snap(nodes(2), [gang("head", 2, 8)], [bf, busy], now=2000))
    assert d.evictions == [] and d.reasons["head"] == (
        "reserved to start at 1970-01-01T01:40:00Z on n00, n01 (nvlink nvl0), when gangs bf, busy end; not preempting: "
        "evicting the gangs that backfilled past it and may be taken would not make room"
    )


def test_reasons_of_untried_gangs_are_worked_out_when_read():
    """A full cluster settles the pass after the head: the other gangs are never tried, yet each
    gets its reason on the first read, and the mapping behaves like a dict."""
    cluster = nodes(2)
    run = [running(gang(f"r{i}", 1, 8, runtime=7200), [f"n0{i}"]) for i in range(2)]
    pending = [gang("head", 2, 8, submit=1)] + [gang(f"w{i}", 1, 8, submit=2 + i) for i in range(5)]
    d = decide(snap(cluster, pending, run))
    assert d.binds == [] and [r.gang_name for r in d.reservations] == ["head"]
    assert len(d.reasons) == 6 and set(d.reasons) == {g.name for g in pending}
    assert all(d.reasons[f"w{i}"] == "needs 8 GPUs; the cluster has 0 free" for i in range(5))
    assert d.reasons == dict(d.reasons) and "w4" in d.reasons


def test_a_gang_name_used_twice_is_refused_and_the_next_snapshot_decides_as_a_cold_start():
    # Binds and reasons name gangs, so two gangs under one name (or one gang both pending and
    # running) would make them ambiguous: the snapshot is refused, saying which name.
    busy = running(gang("x", 1, 8), ["n00"])
    scheduler = Scheduler()
    for pending, run in (([gang("x", 1, 4), gang("x", 1, 2, submit=1)], []), ([gang("x", 1, 4)], [busy])):
        with pytest.raises(ValueError, match="gang name 'x' is used more than once among the pending and running"):
            scheduler.decide(snap(nodes(2), pending, run))
    # a Scheduler keeps indexes between calls (incremental): a corrected snapshot decides as from cold
    fixed = snap(nodes(2), [gang("x", 1, 4), gang("y", 1, 2)], [])
    warm = scheduler.decide(fixed)
    assert warm == decide(fixed)
    assert set(bound(warm)) == {"x", "y"}


@pytest.mark.parametrize("used", [[], [8] * 40, [8] * 63, [8] * 64, [5] + [8] * 63, [8, 5] + [8] * 62])
def test_free_gpus_on_the_nodes_a_gang_may_use(used):
    """The free GPUs a reason counts on the nodes a gang's selector allows are those nodes' free
    GPUs, whether few nodes have GPUs free (counted node by node) or many (summed at once)."""
    node_list = [replace(n, labels={"pool": "ab"[i % 2]}) for i, n in enumerate(nodes(64))]
    run = [running(gang(f"r{i}", 1, gpus), [node_list[i].name]) for i, gpus in enumerate(used)]
    wanting = gang("g", 1, 8, node_selector={"pool": "b"})
    snapshot = snap(node_list, [wanting], run)
    state = CycleState(snapshot, *Scheduler().indexes_for(snapshot))
    cluster = recover.run(state)
    allowed = cluster.allowed_nodes(wanting, state.memo.profile(wanting))
    in_pool_b = [8 - (used[i] if i < len(used) else 0) for i in range(1, 64, 2)]
    assert explain.FreeView(cluster, allowed).total_gpu == sum(in_pool_b)
