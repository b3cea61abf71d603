"""Property-based checks of decide() on random clusters, queues and gangs.

The default run draws a few examples per property; ``pytest -m slow`` draws 2,500 per property.
"""

import itertools
import random
import re
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railforge.scheduler import (
    GPU,
    Gang,
    Member,
    Node,
    NodeSelectorRequirement,
    Queue,
    ReasonCode,
    RunningGang,
    Scheduler,
    SchedulerConfig,
    Snapshot,
    Spread,
    Taint,
    Together,
    Toleration,
    TopologyConstraint,
    decide,
    reasons,
)
from railforge.scheduler.core import run_cycle
from railforge.scheduler.cycle import CycleState
from railforge.scheduler.fairshare import QueueTree
from railforge.scheduler.placement import _shapes, _summed, failure_key_of, gang_profile, gpu_counts_suffice
from railforge.scheduler.stages import recover

QUEUES = ("org", "a", "b", "c", "undeclared")  # gangs may name a queue the snapshot does not declare
CONFIGS = (
    SchedulerConfig(),
    SchedulerConfig(backfill="conservative", reservation_depth=3),
    SchedulerConfig.preset("strict_fifo"),
    SchedulerConfig.preset("best_effort_fifo"),
    SchedulerConfig.preset("sjf_oracle"),
    SchedulerConfig(aging_bound=2500.0),  # about half the pending gangs are aged
    replace(SchedulerConfig.preset("strict_fifo"), aging_bound=2500.0),
)
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


RAIL = "rdma/rail0"
LEAF = "railforge.io/leaf"
TAINTS = (
    Taint("dedicated", "infra"),
    Taint("spot", "", "PreferNoSchedule"),
    Taint("drain", "", "NoExecute"),
)
AFFINITY = (
    NodeSelectorRequirement("pool", "NotIn", ("b",)),
    NodeSelectorRequirement("pool", "Exists"),
    NodeSelectorRequirement("pool", "DoesNotExist"),
)


def random_gang(rng: random.Random, name: str, now: float, pin_to: tuple[str, ...] = ()) -> Gang:
    """``pin_to``: node names a pending gang may pin its members to (one time in six; now and then to a name no
    node has, too)."""
    pods = rng.randint(1, 4)
    gpus = rng.choice((0, 1, 2, 4, 8))
    requests = {GPU: gpus, "cpu": rng.choice((500, 4000, 16000))}
    if rng.random() < 0.3:
        requests["memory"] = rng.choice((2**30, 64 * 2**30))
    if rng.random() < 0.2:
        requests[RAIL] = 1
    members = tuple(Member(f"{name}-{j}", dict(requests)) for j in range(pods))
    if rng.random() < 0.3:
        members = (Member(f"{name}-launcher", {"cpu": 1000}), *members)
    if pin_to and rng.random() < 1 / 6:
        choices = pin_to if rng.random() < 0.9 else (*pin_to, "gone")
        members = tuple(replace(member, node=rng.choice(choices)) for member in members)
    spreads = ()
    if rng.random() < 0.2:  # the pods of its shape spread over nodes or leaves, counting pods already on some
        names = tuple(m.name for m in members if m.requests == requests)
        kind = rng.random()
        if kind < 0.5:
            counted = tuple((f"n{i}", rng.randint(1, 2)) for i in range(9) if rng.random() < 0.2)
            spread = Spread(names, rng.randint(1, 2), counted)
        elif kind < 0.75:
            counted = tuple((f"l{i}", rng.randint(1, 2)) for i in range(3) if rng.random() < 0.3)
            spread = Spread(names, rng.randint(1, 2), counted, topology_key=LEAF)
        else:
            counted = tuple((f"l{i}", rng.randint(0, 2)) for i in range(3))
            spread = Spread(names, None, counted, topology_key=LEAF, max_skew=rng.randint(1, 2))
        spreads = (replace(spread, required=rng.random() < 0.8),)
    return Gang(
        name,
        rng.choice(QUEUES[1:]),
        members,
        min_member=rng.choice((None, None, len(members) - 1 or None)),
        priority=rng.randint(0, 2),
        submit_time=now - rng.uniform(0, 5000),
        max_runtime=rng.choice((None, 600.0, 1800.0, 7200.0)),
        topology=rng.choice(
            (None, TopologyConstraint("leaf"), TopologyConstraint("nvlink", required=False), TopologyConstraint("rack"))
        ),  # "rack" is no level of the scheduler's: such gangs are refused
        node_selector=rng.choice(({}, {}, {"pool": "a"})),
        affinity=(rng.choice(AFFINITY),) if rng.random() < 0.2 else (),
        tolerations=tuple(
            Toleration(taint.key, "Exists", effect=taint.effect) for taint in TAINTS if rng.random() < 0.3
        ),
        min_resources={GPU: gpus * pods + 4} if rng.random() < 0.1 else None,
        spreads=spreads,
        together=Together(rng.choice(("pool", LEAF))) if rng.random() < 0.1 else None,
        preferred_affinity=(rng.choice(AFFINITY),) if rng.random() < 0.2 else (),
    )


@st.composite
def snapshots(draw) -> Snapshot:
    rng = random.Random(draw(st.integers(0, 2**32)))
    now = 10_000.0
    nodes = tuple(
        Node(
            f"n{i}",
            {
                GPU: rng.choice((4, 8)),
                "cpu": 32_000,
                "memory": 256 * 2**30,
                **({RAIL: 2} if rng.random() < 0.5 else {}),
            },
            labels={
                **({"pool": rng.choice("ab")} if rng.random() < 0.7 else {}),
                # the path in labels, read through topology_label_keys when topology is empty
                "railforge.io/spine": "s0",
                LEAF: f"l{i // 3}",
            },
            taints=(rng.choice(TAINTS),) if rng.random() < 0.2 else (),
            schedulable=rng.random() > 0.1,
            ready=rng.random() > 0.1,
            topology=("s0", f"l{i // 3}", f"v{i // 2}") if rng.random() < 0.8 else (),
        )
        for i in range(rng.randint(1, 9))
    )
    queues = (
        Queue("org", limit={GPU: rng.choice((16, 32, 1000))}),
        Queue("a", parent="org", quota={GPU: rng.choice((0, 8, 16))}, limit={GPU: rng.choice((8, 24, 1000))}),
        Queue("b", parent="org", quota={GPU: rng.choice((0, 8))}, over_quota_weight=2.0),
        Queue("c", quota={GPU: 4}, limit={"cpu": rng.choice((20_000, 10**6))}, default_max_runtime=3600.0),
    )
    free = {node.name: dict(node.allocatable) for node in nodes}
    running = []
    for k in range(rng.randint(0, 6)):
        gang = random_gang(rng, f"r{k}", now)
        placement = {}
        for member in gang.members:
            fits = [n for n in sorted(free) if all(free[n].get(r, 0) >= v for r, v in member.requests.items())]
            if not fits:
                break
            node = rng.choice(fits)
            placement[member.name] = node
            for r, v in member.requests.items():
                free[node][r] -= v
        if len(placement) == len(gang.members):
            start = now - rng.uniform(0, 3000)
            end = start + gang.max_runtime if gang.max_runtime else float("inf")
            failed = (gang.members[0].name,) if rng.random() < 0.1 else ()
            passed = f"p{rng.randint(0, 9)}" if rng.random() < 0.4 else None  # may be preempted by it
            running.append(RunningGang(gang, placement, start, end, rng.random() < 0.5, failed, passed))
        else:
            for member_name, node in placement.items():
                requests = next(m.requests for m in gang.members if m.name == member_name)
                for r, v in requests.items():
                    free[node][r] += v
    names = tuple(node.name for node in nodes)
    pending = tuple(random_gang(rng, f"p{k}", now, names) for k in range(rng.randint(0, 10)))
    return Snapshot(now, nodes, queues, pending, tuple(running), {"a": 1e5}, rng.choice(CONFIGS))


def after(snap: Snapshot, decisions) -> tuple[dict, dict, dict]:
    """Node usage, queue usage and (gang -> (node, requests, end)) once the decisions apply."""
    gone = {e.gang_name for e in decisions.evictions} | {r.gang_name for r in decisions.restarts}
    gone |= {f.gang_name for f in decisions.failures}
    pending = {g.name: g for g in snap.pending}
    tree = QueueTree(snap.queues)
    node_use: dict[str, dict[str, int]] = {}
    queue_use: dict[str, dict[str, int]] = {}
    pods: dict[str, list[tuple[str, dict, float]]] = {}

    def add(gang: Gang, placement: dict, end: float) -> None:
        requests = {m.name: m.requests for m in gang.members}
        for member, node in placement.items():
            pods.setdefault(gang.name, []).append((node, requests[member], end))
            for r, v in requests[member].items():
                node_use.setdefault(node, {}).setdefault(r, 0)
                node_use[node][r] += v
                for queue in tree.path(gang.queue):
                    queue_use.setdefault(queue, {}).setdefault(r, 0)
                    queue_use[queue][r] += v

    for run in snap.running:
        if run.gang.name not in gone:
            add(run.gang, dict(run.placement), run.expected_end)
    for bind in decisions.binds:
        gang = pending[bind.gang_name]
        runtime = gang.max_runtime
        if runtime is None:
            runtime = tree.get(gang.queue).default_max_runtime or float("inf")
        add(gang, bind.placement, snap.now + runtime)
    return node_use, queue_use, pods


def check_capacity_and_whole_gangs(snap: Snapshot) -> None:
    decisions = decide(snap)
    node_use, _, _ = after(snap, decisions)
    nodes = {n.name: n for n in snap.nodes}
    for name, use in node_use.items():
        for resource, amount in use.items():
            assert amount <= nodes[name].allocatable.get(resource, 0), (name, resource)
    pending = {g.name: g for g in snap.pending}
    for bind in decisions.binds:
        gang = pending[bind.gang_name]
        for name in set(bind.placement.values()):
            node = nodes[name]
            assert node.ready and node.schedulable
            assert all(node.labels.get(key) == value for key, value in gang.node_selector.items())
            assert all(requirement.matches(node.labels) for requirement in gang.affinity)
            assert all(
                any(t.tolerates(taint) for t in gang.tolerations)
                for taint in node.taints
                if taint.effect != "PreferNoSchedule"
            ), (name, node.taints)
        assert all(bind.placement.get(m.name, m.node) == m.node for m in gang.members if m.node is not None)
        placed = [member for member in gang.members if member.name in bind.placement]
        on = tuple(nodes[bind.placement[member.name]] for member in placed)
        assert all(keeps(spread, tuple(placed), on) for spread in gang.spreads if spread.required), bind.placement
        if gang.together is not None:
            assert len({node.labels.get(gang.together.topology_key) for node in on} - {None}) == 1, bind.placement
            assert all(gang.together.topology_key in node.labels for node in on), bind.placement
        required = {m.name for m in gang.members[: gang.required_members]}
        assert required <= set(bind.placement)
        assert set(bind.placement) <= {m.name for m in gang.members}
    assert len({b.gang_name for b in decisions.binds}) == len(decisions.binds)


def check_limits(snap: Snapshot) -> None:
    """No queue grows past its limit, and no gang of an undeclared queue starts (a gang cannot
    leave its queue's limit behind by naming another)."""
    decisions = decide(snap)
    declared = {queue.name for queue in snap.queues}
    assert all(g.queue in declared for g in snap.pending if g.name in {b.gang_name for b in decisions.binds})
    _, before, _ = after(snap, type(decisions)())  # nothing applied: the starting usage
    _, now_use, _ = after(snap, decisions)
    for queue in snap.queues:
        for resource, limit in queue.limit.items():
            used = now_use.get(queue.name, {}).get(resource, 0)
            grew = used > before.get(queue.name, {}).get(resource, 0)
            assert not grew or used <= limit, (queue.name, used, limit)


def check_evictions_have_a_cause(snap: Snapshot) -> None:
    """Only whole gangs past their minimum runtime are evicted, each for a gang that starts in the
    same call: a borrower reclaimed, or a gang of the starter's queue that backfilled past it."""
    decisions = decide(snap)
    running = {r.gang.name: r for r in snap.running}
    bound = {b.gang_name for b in decisions.binds}
    pending = {g.name: g for g in snap.pending}
    for eviction in decisions.evictions:
        victim = running[eviction.gang_name]
        assert not victim.failed_members
        assert snap.now - victim.start_time >= snap.config.min_runtime_before_reclaim
        if eviction.cause == "reclaim":
            assert snap.config.reclaim and victim.borrowed
        else:
            claimer = victim.backfilled_past
            assert snap.config.preempt_backfill and claimer in bound
            assert pending[claimer].queue == victim.gang.queue
    assert not decisions.evictions or decisions.binds


def check_reservations_hold(snap: Snapshot) -> None:
    """With exact runtimes, every reserved gang can still start at its reserved time: on each of its
    nodes, what it holds fits beside every pod still running then (including the binds of this call),
    and what it holds covers its required members."""
    decisions = decide(snap)
    _, _, pods = after(snap, decisions)
    pending = {g.name: g for g in snap.pending}
    nodes = {n.name: n for n in snap.nodes}
    for reservation in decisions.reservations:
        gang = pending[reservation.gang_name]
        held = {node: dict(amounts) for node, amounts in reservation.held}
        assert set(held) == set(reservation.nodes), reservation
        for name in reservation.nodes:
            free = dict(nodes[name].allocatable)
            for gang_pods in pods.values():
                for node, requests, end in gang_pods:
                    if node == name and end > reservation.start:
                        for resource, amount in requests.items():
                            free[resource] = free.get(resource, 0) - amount
            for resource, amount in held[name].items():
                free[resource] = free.get(resource, 0) - amount
            assert all(amount >= 0 for amount in free.values()), (reservation, name, free)
        total: dict[str, int] = {}
        for amounts in held.values():
            for resource, amount in amounts.items():
                total[resource] = total.get(resource, 0) + amount
        for member in gang.members[: gang.required_members]:
            for resource, amount in member.requests.items():
                total[resource] = total.get(resource, 0) - amount
        assert all(amount >= 0 for amount in total.values()), (reservation, total)


def check_deterministic(snap: Snapshot) -> None:
    shuffled = Snapshot(
        snap.now,
        tuple(reversed(snap.nodes)),
        tuple(reversed(snap.queues)),
        tuple(reversed(snap.pending)),
        tuple(reversed(snap.running)),
        snap.usage,
        snap.config,
    )
    assert decide(snap) == decide(snap) == decide(shuffled)


def exhaustive_decide(snap: Snapshot):
    """A pass that tries every waiting gang instead of stopping once nothing more can change."""
    return run_cycle(CycleState(snap, *Scheduler().indexes_for(snap), shortcuts=False))


def check_early_stop_changes_nothing(snap: Snapshot) -> None:
    """Stopping the pass early is only a shortcut: the same binds, evictions, reservations, and a
    reason for every pending gang that did not start."""
    fast, full = decide(snap), exhaustive_decide(snap)
    assert (fast.binds, fast.evictions, fast.reservations) == (full.binds, full.evictions, full.reservations)
    started = {b.gang_name for b in fast.binds} | {f.gang_name for f in fast.failures}
    assert set(fast.reasons) == {g.name for g in snap.pending} - started == set(full.reasons)
    assert fast.reasons == full.reasons


def check_warm_index_changes_nothing(snap: Snapshot) -> None:
    """A Scheduler keeps the pending and running gangs indexed from its previous call
    (``incremental``): whatever that call was handed, including other gangs under the same names
    and equal copies (which the index keeps in place of the snapshot's own objects), or the same
    running gangs at an earlier time, the result is that of a cold start (a fresh Scheduler)."""
    rng = random.Random(len(snap.pending) + len(snap.running))
    earlier = [random_gang(rng, f"gone{k}", snap.now) for k in range(rng.randint(0, 3))]
    for gang in snap.pending:
        draw = rng.random()
        if draw < 0.3:
            earlier.append(gang)
        elif draw < 0.45:
            earlier.append(replace(gang))
        elif draw < 0.7:
            earlier.append(replace(gang, priority=gang.priority + 1, max_runtime=None))
    if rng.random() < 0.4:  # the same gangs run, earlier (a reservation found then may be kept)
        earlier_running = list(snap.running)
        earlier_now = snap.now - rng.choice((0.0, 60.0, 3600.0))
        if rng.random() < 0.5:
            earlier = list(snap.pending)
    else:
        earlier_running = [r if rng.random() < 0.7 else replace(r) for r in snap.running if rng.random() < 0.5]
        earlier_running += [
            replace(r, borrowed=not r.borrowed, backfilled_past=None if r.backfilled_past else "p0")
            for r in snap.running
            if r not in earlier_running
        ]
        earlier_now = snap.now
    scheduler = Scheduler()
    scheduler.decide(replace(snap, now=earlier_now, pending=tuple(earlier), running=tuple(earlier_running)))
    assert scheduler.decide(snap) == decide(snap)


def check_every_reason_has_a_code(snap: Snapshot) -> None:
    """Every pending gang's reason, read through Decisions, carries a ReasonCode."""
    reasons_given = decide(snap).reasons
    assert all(isinstance(reasons_given.code(name), ReasonCode) for name in reasons_given)


def check_empty_cluster_counts_agree(snap: Snapshot) -> None:
    """Whether a gang of one required pod shape, free to spread over the cluster, fits the empty
    cluster is counted per node allocatable; that count agrees with placing the gang in the view
    of the nodes with nothing running (the general check, which gangs of several shapes take)."""
    state = CycleState(snap, *Scheduler().indexes_for(snap))
    cluster = recover.run(state)
    for gang in snap.pending:
        profile = state.memo.profile(gang)
        if len(profile.required_shapes) == 1:
            allowed = cluster.allowed_nodes(gang, profile)
            placed = cluster.empty_view().fits(profile, allowed, (0.0, 0.0), -1, -1)
            assert cluster.fits_when_empty(profile, allowed, -1, -1) == placed, gang


def check_kept_counts_follow_changes(snap: Snapshot) -> None:
    """What a view keeps between changes (pod slots per pod size for ``could_fit``, free GPUs per
    node filter for the reasons) equals what counting afresh gives, after every bind-like take and
    give-back, in the view and in a copy of it (a future view)."""
    state = CycleState(snap, *Scheduler().indexes_for(snap))
    cluster = recover.run(state)
    gangs = list(snap.pending) if cluster.nodes else []  # a view with no node takes no change
    filters = [cluster.allowed_nodes(gang, state.memo.profile(gang)) for gang in gangs]
    rng = random.Random(len(gangs) * 31 + len(cluster.nodes))
    views = [cluster]
    for step in range(12):
        if step == 6:
            views.append(views[0].copy())
        view = rng.choice(views)
        for gang, allowed in zip(gangs, filters, strict=True):
            profile = state.memo.profile(gang)
            fresh = gpu_counts_suffice(profile, view.total_free_gpu, view.gpu_histogram)
            assert view.could_fit(profile) == fresh, gang
            if allowed is not None:
                assert view.free_gpu_on(allowed) == sum(itertools.compress(view.free_gpu, allowed)), gang
        if gangs:
            requests = rng.choice(rng.choice(gangs).members).requests
            view.adjust(rng.randrange(len(view.nodes)), requests, rng.choice((-1, +1)))


PROPERTIES = (
    check_capacity_and_whole_gangs,
    check_evictions_have_a_cause,
    check_limits,
    check_reservations_hold,
    check_deterministic,
    check_early_stop_changes_nothing,
    check_warm_index_changes_nothing,
    check_every_reason_has_a_code,
    check_empty_cluster_counts_agree,
    check_kept_counts_follow_changes,
)


@pytest.mark.parametrize("check", PROPERTIES, ids=lambda f: f.__name__)
@FAST
@given(snap=snapshots())
def test_property(check, snap):
    check(snap)


@pytest.mark.slow
@pytest.mark.parametrize("check", PROPERTIES, ids=lambda f: f.__name__)
@SLOW
@given(snap=snapshots())
def test_property_many_cases(check, snap):
    check(snap)


# -- placement against a brute-force checker ------------------------------------------------------


PREFER_B = NodeSelectorRequirement("pool", "In", ("b",))


@st.composite
def one_gang_on_a_small_cluster(draw) -> Snapshot:
    """A few nodes of different GPU, CPU and RDMA shapes, maybe a running gang, and one pending gang
    of up to 3 pod shapes (6 pods), maybe with a node selector, a required leaf or a preferred pool."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    nodes = tuple(
        Node(
            f"n{i}",
            {GPU: rng.choice((0, 4, 8)), "cpu": rng.choice((16, 32, 64, 96, 128)) * 1000, RAIL: rng.choice((0, 1, 2))},
            labels={"pool": rng.choice("ab"), **({"zone": f"z{i % 2}"} if i < 3 else {})},  # n3: in no zone
            topology=("s0", f"l{i // 2}"),
        )
        for i in range(rng.randint(1, 4))
    )
    members = []
    for s in range(rng.randint(1, 3)):
        requests = {GPU: rng.choice((0, 2, 4, 8)), "cpu": rng.choice((8, 16, 32, 60, 90, 120)) * 1000}
        if rng.random() < 0.3:
            requests[RAIL] = 1
        members += [Member(f"s{s}-{k}", requests) for k in range(rng.randint(1, 2))]
    spreads = ()
    if rng.random() < 0.4:  # the pods of the first shape, or all of them: at most one or two to a node or zone,
        # or spread over nodes or zones with a skew of one or two, counting pods already in some of them
        spread_out = tuple(m.name for m in members if rng.random() < 0.5 or m.name.startswith("s0-"))
        key = rng.choice((None, "zone"))
        domains = sorted({node.name if key is None else node.labels.get(key) for node in nodes} - {None})
        if rng.random() < 0.5:
            spreads = (Spread(spread_out, rng.randint(1, 2), source="test", topology_key=key),)
        else:
            running = tuple((domain, rng.choice((0, 0, 1, 2))) for domain in domains)
            spreads = (Spread(spread_out, None, running, source="test", topology_key=key, max_skew=rng.randint(1, 2)),)
    pending = Gang(
        "g",
        "q",
        tuple(members),
        max_runtime=3600.0,
        node_selector=rng.choice(({}, {}, {"pool": "a"})),
        topology=rng.choice((None, None, TopologyConstraint("leaf"))),
        spreads=spreads,
        together=Together("zone") if rng.random() < 0.2 else None,  # every pod in one zone (n3 is in none)
        # a preference (pod affinity towards bound pods) never rules a node out, even one it cannot meet
        preferred_affinity=rng.choice(((), (), (PREFER_B,), (NodeSelectorRequirement("pool", "NotIn", ("a",)),))),
    )
    running = ()
    if rng.random() < 0.5:
        node = rng.choice(nodes)
        share = {name: amount // rng.choice((1, 2, 4)) for name, amount in node.allocatable.items()}
        busy = Gang("busy", "q", (Member("busy-0", share),), max_runtime=600.0)
        running = (RunningGang(busy, {"busy-0": node.name}, 0.0, 600.0),)
    config = SchedulerConfig(backfill=rng.choice(("easy", "none")))
    return Snapshot(100.0, nodes, (Queue("q"),), (pending,), running, {}, config)


def keeps(spread: Spread, members: tuple[Member, ...], choice: tuple[Node, ...]) -> bool:
    """Whether the members on the chosen nodes keep the spread, read from its definition."""
    placed = Counter(
        spread.domain(node) for member, node in zip(members, choice, strict=True) if member.name in spread.members
    )
    running = dict(spread.running)
    if spread.max_skew is not None:
        counts = [count + placed[domain] for domain, count in running.items()]
        return not counts or max(counts) - min(counts) <= spread.max_skew
    return all(count + running.get(domain, 0) <= spread.max_per_domain for domain, count in placed.items() if domain)


def brute_force_fits(gang: Gang, nodes: tuple[Node, ...], used: dict[str, dict[str, int]]) -> bool:
    """Whether some assignment of the gang's pods to the nodes it may use fits, trying them all."""
    allowed = [n for n in nodes if all(n.labels.get(k) == v for k, v in gang.node_selector.items())]
    for choice in itertools.product(allowed, repeat=len(gang.members)):
        if gang.topology is not None and len({node.topology[:2] for node in choice}) > 1:
            continue
        if not all(keeps(spread, gang.members, choice) for spread in gang.spreads):
            continue
        zones = {node.labels.get(gang.together.topology_key) for node in choice} if gang.together else {""}
        if len(zones) != 1 or None in zones:
            continue  # not one zone, or a node in none
        load = {node.name: dict(used.get(node.name, {})) for node in allowed}
        for member, node in zip(gang.members, choice, strict=True):
            for name, amount in member.requests.items():
                load[node.name][name] = load[node.name].get(name, 0) + amount
        if all(amount <= node.allocatable.get(name, 0) for node in allowed for name, amount in load[node.name].items()):
            return True
    return False


def check_placed_whenever_a_placement_exists(snap: Snapshot) -> None:
    """The gang starts when some placement fits now; otherwise it waits, and it is called unfit
    exactly when no placement fits even the empty cluster; a "cluster has N free" reason is true."""
    decisions = decide(snap)
    gang = snap.pending[0]
    used = {r.placement["busy-0"]: dict(r.gang.members[0].requests) for r in snap.running}
    fits_now = brute_force_fits(gang, snap.nodes, used)
    assert bool(decisions.binds) == fits_now, decisions.reasons
    if fits_now:
        one_pod = len(gang.members) == 1 and not gang.spreads  # a spread's own view places a gang that has one
        if gang.preferred_affinity == (PREFER_B,) and not gang.node_selector and one_pod:
            preferred = tuple(node for node in snap.nodes if node.labels["pool"] == "b")
            if brute_force_fits(gang, preferred, used):  # one pod: a node of its preferred pool, where one has room
                (placement,) = [bind.placement for bind in decisions.binds]
                assert {node.name for node in preferred} >= set(placement.values()), (placement, preferred)
        return
    reason = decisions.reasons["g"]
    # with nothing running, the pods a spread counts are gone too: its domains are all empty
    alone = tuple(
        replace(spread, running=tuple((domain, 0) for domain, _ in spread.running)) for spread in gang.spreads
    )
    assert reason.startswith(reasons.UNFIT) == (not brute_force_fits(replace(gang, spreads=alone), snap.nodes, {})), (
        reason
    )
    short = re.match(r"needs (\d+) GPUs?; the cluster has (\d+) free", reason)
    if short:
        free = sum(n.allocatable[GPU] for n in snap.nodes) - sum(u.get(GPU, 0) for u in used.values())
        assert int(short[2]) == free < int(short[1])


@settings(FAST, max_examples=300)  # cheap cases: enough of them to meet the greedy fill's misses
@given(snap=one_gang_on_a_small_cluster())
def test_property_placed_whenever_a_placement_exists(snap):
    check_placed_whenever_a_placement_exists(snap)


@pytest.mark.slow
@SLOW
@given(snap=one_gang_on_a_small_cluster())
def test_property_placed_whenever_a_placement_exists_many_cases(snap):
    check_placed_whenever_a_placement_exists(snap)


# -- reclaim against a brute-force search of victim sets ------------------------------------------

RECLAIM_WORK_BOUND = 2.0  # the work a reclaim loses is at most this many times the least that frees the room


@st.composite
def a_claim_among_borrowers(draw) -> Snapshot:
    """2-4 nodes of 8 GPUs, two to a leaf, filled with borrowed gangs of 1-2 pods of different ages,
    and one gang of the owning queue (within its quota) that fits only by reclaiming; maybe with a
    required or preferred leaf."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    count = rng.randint(2, 4)
    cluster = tuple(Node(f"n{i}", {GPU: 8, "cpu": 64_000}, topology=("s", f"l{i // 2}", f"v{i}")) for i in range(count))
    free = {node.name: 8 for node in cluster}
    borrowers = []
    for b in range(rng.randint(1, 6)):
        gpus = rng.choice((1, 2, 4, 8))
        members = tuple(Member(f"b{b}-{k}", {GPU: gpus, "cpu": 1000}) for k in range(rng.randint(1, 2)))
        placement = {}
        for member in members:
            room = [name for name, left in free.items() if left >= gpus]
            if not room:
                break
            placement[member.name] = rng.choice(room)
            free[placement[member.name]] -= gpus
        if len(placement) < len(members):
            for node in placement.values():
                free[node] += gpus
            continue
        start = rng.uniform(0.0, 4000.0)
        gang = Gang(f"b{b}", "borrower", members, max_runtime=86_400.0)
        borrowers.append(RunningGang(gang, placement, start, start + 86_400.0, borrowed=True))
    topology = rng.choice((None, TopologyConstraint("leaf"), TopologyConstraint("leaf", required=False)))
    pods = rng.randint(1, 2)
    claim = Gang(
        "claim",
        "owner",
        tuple(Member(f"claim-{k}", {GPU: rng.choice((2, 4, 8)), "cpu": 1000}) for k in range(pods)),
        max_runtime=3600.0,
        topology=topology,
    )
    queues = (Queue("owner", quota={GPU: 8 * len(cluster)}), Queue("borrower"))
    config = SchedulerConfig(min_runtime_before_reclaim=0, reclaim_cost_limit=None)
    return Snapshot(5000.0, cluster, queues, (claim,), tuple(borrowers), config=config)


def least_work_freeing_room(snap: Snapshot, one_leaf: bool) -> float | None:
    """The least work (GPUs x run time) a set of borrowed gangs loses whose eviction lets the claim
    fit, in one leaf when ``one_leaf``; None when no set does."""
    claim = replace(snap.pending[0], topology=TopologyConstraint("leaf") if one_leaf else None)
    least = None
    for size in range(len(snap.running) + 1):
        for victims in itertools.combinations(snap.running, size):
            lost = sum(lost_work(snap, victim) for victim in victims)
            if least is not None and lost >= least:
                continue
            used: dict[str, dict[str, int]] = {}
            for kept in snap.running:
                if any(kept is victim for victim in victims):
                    continue
                for member in kept.gang.members:
                    load = used.setdefault(kept.placement[member.name], {})
                    load[GPU] = load.get(GPU, 0) + member.requests[GPU]
            if brute_force_fits(claim, snap.nodes, used):
                least = lost
    return least


def lost_work(snap: Snapshot, running: RunningGang) -> float:
    return sum(member.requests[GPU] for member in running.gang.members) * (snap.now - running.start_time)


def check_reclaim_frees_one_domain_losing_little_work(snap: Snapshot) -> None:
    """The claim starts whenever evicting some borrowers would let it, losing at most RECLAIM_WORK_BOUND
    times the least work that makes room (in one leaf when it requires one); a claim that prefers one leaf is
    placed in one when some eviction that frees a leaf loses no more work than the one made."""
    decisions = decide(snap)
    claim = snap.pending[0]
    anywhere = least_work_freeing_room(snap, one_leaf=False)
    in_one_leaf = least_work_freeing_room(snap, one_leaf=True) if claim.topology is not None else None
    least = in_one_leaf if claim.topology and claim.topology.required else anywhere
    assert bool(decisions.binds) == (least is not None), decisions.reasons
    if least is None:
        assert not decisions.evictions
        return
    evicted = {eviction.gang_name for eviction in decisions.evictions}
    lost = sum(lost_work(snap, running) for running in snap.running if running.gang.name in evicted)
    assert lost <= RECLAIM_WORK_BOUND * least + 1e-6, (lost, least, evicted)
    if in_one_leaf is not None and in_one_leaf <= lost:
        leaves = {int(node[1:]) // 2 for node in decisions.binds[0].placement.values()}
        assert len(leaves) == 1, (decisions.binds[0].placement, lost, in_one_leaf)


@FAST
@given(snap=a_claim_among_borrowers())
def test_property_reclaim_frees_one_domain_losing_little_work(snap):
    check_reclaim_frees_one_domain_losing_little_work(snap)


@pytest.mark.slow
@SLOW
@given(snap=a_claim_among_borrowers())
def test_property_reclaim_frees_one_domain_losing_little_work_many_cases(snap):
    check_reclaim_frees_one_domain_losing_little_work(snap)


@FAST
@given(
    requests=st.dictionaries(st.sampled_from([GPU, "cpu", "memory"]), st.integers(0, 8), min_size=1),
    count=st.integers(1, 4),
    data=st.data(),
)
def test_profile_of_alike_members_matches_member_by_member(requests, count, data):
    """A gang whose members all request the same takes a shortcut to its profile; it gives what
    grouping and summing member by member gives (shapes, charges, GPUs, the failure key)."""
    min_member = data.draw(st.none() | st.integers(1, count))
    min_resources = data.draw(st.none() | st.dictionaries(st.sampled_from([GPU, "cpu"]), st.integers(0, 40)))
    members = tuple(Member(f"m{i}", requests) for i in range(count))
    gang = Gang("g", "a", members, min_member=min_member, min_resources=min_resources)
    keys: dict[tuple, int] = {}
    profile = gang_profile(gang, lambda key: keys.setdefault(key, len(keys)))
    required = members[: gang.required_members]
    admission = _summed(required)
    for name, amount in (min_resources or {}).items():
        admission[name] = max(admission.get(name, 0), amount)
    assert profile.required_shapes == _shapes(required, {})
    assert profile.optional_shapes == _shapes(members[gang.required_members :], {})
    assert profile.admission == admission
    assert profile.gpu == _summed(members).get(GPU, 0)
    assert profile.member_requests() == {member.name: requests for member in members}
    signatures = tuple(shape.signature for shape in _shapes(required, {}))
    assert keys[failure_key_of(profile.filter_key, None, signatures, admission.get(GPU, 0))] == profile.failure_key
