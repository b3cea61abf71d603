"""Every reason carries a stable code beside its sentence, and the codes are documented."""

import pickle
import re
from dataclasses import replace
from pathlib import Path

from sched_helpers import gang, nodes, running

from railforge.scheduler import (
    GPU,
    Member,
    Node,
    NodeSelectorRequirement,
    Queue,
    ReasonCode,
    SchedulerConfig,
    Snapshot,
    Taint,
    TopologyConstraint,
    decide,
)

DOC = Path(__file__).parents[3] / "docs" / "scheduler-core.md"
EASY = SchedulerConfig()
NO_BACKFILL = SchedulerConfig(backfill="none")


def codes(snapshot: Snapshot) -> dict[str, ReasonCode]:
    decisions = decide(snapshot)
    return {name: decisions.reasons.code(name) for name in decisions.reasons}


def test_every_code_is_in_the_docs_table_and_the_table_names_no_other():
    documented = re.findall(r"^\| `([a-z.-]+)` \|", DOC.read_text(), flags=re.MULTILINE)
    assert sorted(documented) == sorted(code.value for code in ReasonCode)


def test_never_fits_codes_name_the_node_rule_or_what_is_missing():
    cluster = [
        Node("a", {GPU: 8, "cpu": 64_000}, labels={"pool": "x", "zone": "1"}),
        Node("b", {GPU: 8, "cpu": 64_000}, labels={"pool": "y", "zone": "1"}),
    ]
    tainted = [*cluster, Node("c", {GPU: 8, "cpu": 64_000}, labels={"pool": "z"}, taints=(Taint("d", "x"),))]
    pending = [
        gang("selector", 2, 8, node_selector={"pool": "x"}),
        gang("affinity", 2, 8, affinity=(NodeSelectorRequirement("zone", "In", ("2",)),)),
        gang("total", 3, 8),
        gang("pods", 1, 16),
        gang("domain", 2, 8, topology=TopologyConstraint("nvlink", required=True)),
        gang("level", 1, 8, topology=TopologyConstraint("rack", required=True)),
        replace(gang("cpu", 1, 1), members=(Member("cpu-0", {GPU: 1, "cpu": 128_000}),)),
    ]
    got = codes(Snapshot(100.0, tuple(cluster), (Queue("a"),), tuple(pending), (), config=NO_BACKFILL))
    assert got == {
        "selector": ReasonCode.NEVER_FITS_SELECTOR,
        "affinity": ReasonCode.NEVER_FITS_AFFINITY,
        "total": ReasonCode.NEVER_FITS,
        "pods": ReasonCode.NEVER_FITS_PODS,
        "domain": ReasonCode.NEVER_FITS_DOMAIN,
        "level": ReasonCode.UNKNOWN_LEVEL,
        "cpu": ReasonCode.NEVER_FITS_PODS,
    }
    # with a tainted node too, the selector gang is kept off nodes by two rules
    picky = gang("picky", 3, 8, node_selector={"zone": "1"})
    assert codes(Snapshot(100.0, tuple(tainted), (Queue("a"),), (picky,), ()))["picky"] == (
        ReasonCode.NEVER_FITS_NODE_RULES
    )
    worker_and_loader = (Member("w", {GPU: 8, "cpu": 40_000}), Member("l", {"cpu": 120_000}))
    apart = replace(gang("apart", 1, 1), members=worker_and_loader)
    wide = (Node("A", {GPU: 8, "cpu": 128_000}), Node("B", {GPU: 8, "cpu": 32_000}))
    assert codes(Snapshot(100.0, wide, (Queue("a"),), (apart,), ()))["apart"] == ReasonCode.NEVER_FITS_REQUESTS


def test_capacity_codes_of_gangs_that_fit_an_empty_cluster():
    cluster = (
        Node("a", {GPU: 8, "cpu": 64_000}, labels={"pool": "x", "zone": "1"}),
        Node("b", {GPU: 8, "cpu": 64_000}, labels={"pool": "y", "zone": "2"}),
    )
    busy = running(gang("busy", 1, 8, runtime=None), ["a"])
    pending = [
        gang("selector", 1, 8, node_selector={"pool": "x"}),  # a is busy
        gang("affinity", 1, 8, affinity=(NodeSelectorRequirement("zone", "In", ("1",)),), submit=1),
        gang("cluster", 2, 8, submit=2),
        gang("starts", 1, 8, submit=3),
    ]
    got = codes(Snapshot(100.0, cluster, (Queue("a"),), tuple(pending), (busy,), config=NO_BACKFILL))
    assert got == {
        "selector": ReasonCode.CAPACITY_SELECTOR,
        "affinity": ReasonCode.CAPACITY_AFFINITY,
        "cluster": ReasonCode.CAPACITY_CLUSTER,
    }
    tainted = (
        Node("a", {GPU: 8, "cpu": 64_000}, labels={"pool": "x"}),
        Node("b", {GPU: 8, "cpu": 64_000}, labels={"pool": "y"}, taints=(Taint("d", "x"),)),
        Node("c", {GPU: 8, "cpu": 64_000}, labels={"pool": "y"}),
    )
    busy_too = running(gang("busy2", 1, 8, runtime=None), ["c"])
    pending = [gang("tolerates-none", 1, 8), gang("rules", 1, 8, node_selector={"pool": "y"}, submit=1)]
    got = codes(Snapshot(100.0, tainted, (Queue("a"),), tuple(pending), (busy, busy_too), config=NO_BACKFILL))
    assert got == {"tolerates-none": ReasonCode.CAPACITY_TAINTS, "rules": ReasonCode.CAPACITY_NODE_RULES}


def test_reservation_order_queue_and_limit_codes():
    cluster = tuple(nodes(2))
    run = (running(gang("r0", 1, 8, runtime=7200), ["n00"]), running(gang("r1", 1, 8, runtime=600), ["n01"]))
    head, long_one = gang("head", 2, 8, submit=1), gang("long", 1, 1, submit=2, runtime=9000)
    queues = (Queue("a"), Queue("capped", limit={GPU: 1}))
    capped = [gang("capped", 1, 2, queue="capped", submit=3), gang("stray", 1, 1, queue="nowhere", submit=4)]
    got = codes(Snapshot(100.0, cluster, queues, (head, long_one, *capped), run, config=EASY))
    assert got == {
        "head": ReasonCode.RESERVED,
        "long": ReasonCode.CAPACITY_CLUSTER,
        "capped": ReasonCode.QUOTA_LIMIT_ALONE,
        "stray": ReasonCode.UNDECLARED_QUEUE,
    }
    strict_fifo = SchedulerConfig.preset("strict_fifo")
    strict = Snapshot(100.0, cluster, (Queue("a"),), (head, long_one), run, config=strict_fifo)
    assert codes(strict) == {"head": ReasonCode.CAPACITY_CLUSTER, "long": ReasonCode.STRICT_ORDER}


def test_a_gang_that_would_run_past_a_reservation_is_coded_blocked():
    cluster = tuple(nodes(2))
    run = (running(gang("r0", 1, 8, runtime=600), ["n00"]),)
    head = gang("head", 2, 8, submit=1)
    long_one = gang("long", 1, 8, submit=2, runtime=9000)  # n01 is free now but held from +8m
    got = codes(Snapshot(100.0, cluster, (Queue("a"),), (head, long_one), run, config=EASY))
    assert got == {"head": ReasonCode.RESERVED, "long": ReasonCode.RESERVED_BLOCKED}


def test_failures_and_backoff_carry_codes_and_codes_survive_pickling():
    timed = gang("timed", 1, 8, schedule_timeout=10.0)
    backing_off = gang("backoff", 1, 8, not_before=500.0)
    busy = running(gang("busy", 1, 8, runtime=None), ["n00"])
    decisions = decide(Snapshot(100.0, tuple(nodes(1)), (Queue("a"),), (timed, backing_off), (busy,)))
    assert [(f.gang_name, f.reason.code) for f in decisions.failures] == [("timed", ReasonCode.SCHEDULE_TIMEOUT)]
    assert decisions.reasons.code("backoff") == ReasonCode.BACKOFF
    copied = pickle.loads(pickle.dumps(decisions.reasons["backoff"]))
    assert copied == decisions.reasons["backoff"] and copied.code == ReasonCode.BACKOFF
