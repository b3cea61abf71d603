"""Time one scheduler decide() on synthetic clusters; prints Markdown tables.

Run: PYTHONPATH=src python benchmarks/bench_decide.py [--repeat N] [--quick]

Cluster: 8-GPU nodes, 4 nodes per NVLink domain, 32 nodes per leaf, 8 leaves per spine. Running
pods fill nodes in name order (1-8 GPUs each) up to the requested pod count; pending gangs need
1-64 GPUs (8-GPU pods once a gang needs 8 or more) from four queues with quotas. Times are the
median over repeats, in CPU time (``time.process_time``). Two columns: "cold", the first call of a
new ``Scheduler``, which holds nothing from earlier calls (neither gang indexes nor gang profiles
nor the node list's static view), and "warm", a call of a ``Scheduler`` right after one on a
snapshot that differed by ten gangs (five pending, five running), as in a replay or a controller
loop (see ``railforge.scheduler.incremental`` and ``memo``). Each timed call starts after a full
collection; a third column gives what a full collection costs right after a cold call (see
``call_ms``).

"Varied shapes" cases give each pending gang its own CPU (1-64 cores) and memory (8-512 GiB) per
pod, drawn from a pool of as many distinct shapes as asked (every gang its own: as many as gangs);
one node in four carries a label ``pool=b`` and one in eight a ``dedicated`` taint; one gang in ten
selects ``pool=b`` and one in ten tolerates the taint.

"Spread" cases give every gang of several pods a required spread (placed through ``Cluster.spread_view``):
one pod per node (an MPIJob's workers with pod anti-affinity on kubernetes.io/hostname; the same binds, as
8-GPU pods go one to a node anyway: the cost of the mechanism), one pod per zone (anti-affinity on a zone
label, a zone being a leaf of 32 nodes), or over the zones with a skew of one (a topology spread); "together"
cases keep every such gang in one zone (pod affinity among its own pods on the zone label).

"Preferring" cases are the varied-shapes ones with every gang preferring nodes outside ``pool=b`` (a preferred
pod anti-affinity towards pods bound there): those nodes are tried last; the cost of weighing a preference.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from dataclasses import replace

from railforge.scheduler import (
    GPU,
    Gang,
    Member,
    Node,
    NodeSelectorRequirement,
    Queue,
    RunningGang,
    Scheduler,
    Snapshot,
    Spread,
    Taint,
    Together,
    Toleration,
    decide,
)
from railforge.scheduler.expected import expected_starts

QUEUES = ("vision", "speech", "llm", "research")


GIB = 2**30
DEDICATED = Taint("dedicated", "infra")


def build_nodes(count: int, varied: bool = False) -> tuple[Node, ...]:
    return tuple(
        Node(
            f"node-{i:05d}",
            {GPU: 8, "cpu": 128_000, "memory": 1024 * GIB, "rdma/rail0": 8},
            labels={"zone": f"zone{i // 32:03d}", **({"pool": "b" if i % 4 == 3 else "a"} if varied else {})},
            taints=(DEDICATED,) if varied and i % 8 == 5 else (),
            topology=(f"spine{i // 256}", f"leaf{i // 32:03d}", f"nvl{i // 4:04d}"),
        )
        for i in range(count)
    )


def build_running(nodes: tuple[Node, ...], pods: int, rng: random.Random) -> tuple[RunningGang, ...]:
    running = []
    placed = 0
    for node in nodes:
        free = 8
        while free and placed < pods:
            size = min(free, rng.choice((1, 2, 4, 8)))
            if rng.random() < 0.1:  # leave some scattered free GPUs
                break
            name = f"run-{placed}"
            member = Member(f"{name}-0", {GPU: size, "cpu": 8000 * size, "memory": 64 * 2**30})
            gang = Gang(name, rng.choice(QUEUES), (member,), max_runtime=rng.uniform(600, 86400))
            end = rng.uniform(60, 86400)
            running.append(RunningGang(gang, {member.name: node.name}, 0.0, end))
            free -= size
            placed += 1
    return tuple(running)


def spread_rule(names: tuple[str, ...], spread: str, zones: tuple[str, ...]) -> Spread:
    """The required spread of kind ``spread`` (node, zone, skew) over the members ``names``."""
    if spread == "node":
        return Spread(names, 1)
    if spread == "zone":
        return Spread(names, 1, topology_key="zone")
    return Spread(names, None, tuple((zone, 0) for zone in zones), topology_key="zone", max_skew=1)


def build_pending(
    gangs: int,
    rng: random.Random,
    shapes: int = 0,
    spread: str = "",
    preferred: bool = False,
    zones: tuple[str, ...] = (),
) -> tuple[Gang, ...]:
    """``shapes``: how many distinct (CPU, memory) pod requests the gangs draw theirs from (see the
    module docstring); 0, the CPU request follows the GPUs and no memory is asked. ``spread``: a
    ``spread_rule`` kind for every gang of several pods, over the ``zones``, or "together" (one zone each);
    "" for none."""
    pool = [(1000 * rng.randint(1, 64), GIB * rng.randint(8, 512)) for _ in range(shapes)]
    pending = []
    for i in range(gangs):
        gpus = rng.choice((1, 2, 4, 8, 8, 16, 32, 64))
        pod_gpus = min(gpus, 8)
        requests = {GPU: pod_gpus, "cpu": 8000 * pod_gpus, "rdma/rail0": pod_gpus}
        rules = {}
        if pool:
            requests["cpu"], requests["memory"] = pool[i % shapes]
            rules = {"node_selector": {"pool": "b"}} if i % 10 == 3 else {}
            rules = {"tolerations": (Toleration("dedicated", value="infra"),)} if i % 10 == 7 else rules
        members = tuple(Member(f"g{i}-{j}", requests) for j in range(gpus // pod_gpus))
        if spread == "together" and len(members) > 1:
            rules["together"] = Together("zone")
        elif spread and len(members) > 1:
            rules["spreads"] = (spread_rule(tuple(member.name for member in members), spread, zones),)
        if preferred:
            rules["preferred_affinity"] = (NodeSelectorRequirement("pool", "NotIn", ("b",)),)
        pending.append(
            Gang(
                f"g{i}",
                QUEUES[i % len(QUEUES)],
                members,
                priority=rng.choice((0, 0, 1)),
                submit_time=float(i),
                max_runtime=rng.uniform(600, 3 * 86400),
                **rules,
            )
        )
    return tuple(pending)


def snapshot(
    nodes: int,
    running_pods: int,
    pending_gangs: int,
    shapes: int = 0,
    spread: str = "",
    seed: int = 7,
    preferred: bool = False,
) -> Snapshot:
    rng = random.Random(seed)
    cluster = build_nodes(nodes, varied=shapes > 0)
    quota = {GPU: nodes * 8 // (len(QUEUES) + 1)}
    queues = tuple(Queue(q, quota=quota, over_quota_weight=1.0 + i) for i, q in enumerate(QUEUES))
    usage = {q: 1e6 * (i + 1) for i, q in enumerate(QUEUES)}
    return Snapshot(
        now=100.0,
        nodes=cluster,
        queues=queues,
        pending=build_pending(
            pending_gangs, rng, shapes, spread, preferred, tuple(sorted({node.labels["zone"] for node in cluster}))
        ),
        running=build_running(cluster, running_pods, rng),
        usage=usage,
    )


def philly_snapshot(seed: int = 11) -> Snapshot:
    """The simulator's typical Philly replay state: 56 nodes x 8 GPUs, ~440 GPUs busy in ~300 running
    gangs, 550 pending gangs (mostly 1 GPU, some 2-8, a few 16-64) in 15 queues; the cluster is too
    full for most pending gangs, so the pass is dominated by gangs that cannot start."""
    rng = random.Random(seed)
    queues = tuple(Queue(f"vc{q:02d}", quota={GPU: 448 // 15}) for q in range(15))
    cluster = tuple(
        Node(
            f"node-{i:03d}",
            {GPU: 8, "cpu": 128_000, "memory": 1024 * 2**30},
            topology=("s0", f"leaf{i // 14}"),
        )
        for i in range(56)
    )
    now = 100_000.0
    quota = 448 // 15
    held = {q.name: 0 for q in queues}
    running = []
    busy = 0
    free = {node.name: 8 for node in cluster}
    k = 0
    while busy < 440:
        size = rng.choice((1,) * 10 + (2, 2, 4))
        fits = [n for n in sorted(free) if free[n] >= size]
        if not fits:
            continue
        node = fits[0] if size >= 4 else rng.choice(fits)
        member = Member(f"run-{k}-0", {GPU: size, "cpu": 4000 * size})
        queue = queues[min(14, int(rng.expovariate(0.25)))].name  # a few busy queues borrow
        gang = Gang(f"run-{k}", queue, (member,), max_runtime=rng.uniform(20_600, 86_400))
        start = now - rng.uniform(0, 20_000)
        borrowed = held[queue] + size > quota
        held[queue] += size
        running.append(RunningGang(gang, {member.name: node}, start, start + gang.max_runtime, borrowed))
        free[node] -= size
        busy += size
        k += 1
    pending = []
    for i in range(700):
        gpus = rng.choice((1,) * 14 + (2, 4, 8, 8) + ((16, 32, 64)[i % 3],) * (i % 4 == 0))
        pod = min(gpus, 8)
        members = tuple(Member(f"p{i}-{j}", {GPU: pod, "cpu": 4000 * pod}) for j in range(gpus // pod))
        queue = queues[min(14, int(rng.expovariate(0.25)))].name
        submit = now - rng.uniform(0, 20_000)
        pending.append(Gang(f"p{i}", queue, members, submit_time=submit, max_runtime=rng.uniform(600, 86400)))
    usage = {q.name: rng.uniform(0, 1e7) for q in queues}
    snap = Snapshot(now, cluster, queues, tuple(pending), tuple(running), usage)
    for _ in range(5):  # settle: apply decisions until a call starts and evicts nothing, as in a replay
        decisions = decide(snap)
        if not decisions.binds and not decisions.evictions:
            break
        gone = {e.gang_name for e in decisions.evictions}
        by_name = {g.name: g for g in snap.pending}
        started = tuple(
            RunningGang(by_name[b.gang_name], b.placement, now, now + by_name[b.gang_name].max_runtime, b.borrowed)
            for b in decisions.binds
        )
        bound = {b.gang_name for b in decisions.binds}
        snap = replace(
            snap,
            pending=tuple(g for g in snap.pending if g.name not in bound),
            running=tuple(r for r in snap.running if r.gang.name not in gone) + started,
        )
    return snap


def call_ms(scheduler: Scheduler, snap: Snapshot) -> float:
    """CPU milliseconds of one call (the process's CPU time: on a machine shared with other work,
    wall-clock time would count their turns too; on an idle core the two agree).

    The call starts after a full collection. Otherwise the collector's debt from the calls before
    it (the objects they left, counted towards the next full collection) falls due in whichever
    call crosses the threshold, about one cold call in three, and costs what the whole process
    holds, not what this call does: a run's median then depends on which calls it lands on.
    ``collect_ms`` gives that cost apart."""
    gc.collect()
    start = time.process_time()
    len(scheduler.decide(snap).reasons)  # an adapter reads every reason: count their deferred part
    return (time.process_time() - start) * 1000


def collect_ms() -> float:
    """CPU milliseconds of a full collection: what it adds to a call it falls in."""
    start = time.process_time()
    gc.collect()
    return (time.process_time() - start) * 1000


def median_ms(snap: Snapshot, repeat: int) -> tuple[float, float, float, int, int]:
    """(cold median ms, warm median ms, full collection median ms, pending pods, binds); the
    collection is timed right after each cold call, with that call's Scheduler alive."""
    decisions = decide(snap)
    neighbour = replace(snap, pending=snap.pending[:-5], running=snap.running[:-5])
    scheduler = Scheduler()
    cold, warm, full = [], [], []
    for _ in range(repeat):
        fresh = Scheduler()
        cold.append(call_ms(fresh, snap))
        full.append(collect_ms())
        scheduler.decide(neighbour)
        warm.append(call_ms(scheduler, snap))
    pods = sum(len(g.members) for g in snap.pending)
    medians = statistics.median(cold), statistics.median(warm), statistics.median(full)
    return *medians, pods, len(decisions.binds)


def expected_ms(snap: Snapshot, repeat: int) -> tuple[float, int]:
    """Median CPU ms of planning the expected starts after a decision (``railforge.scheduler.expected``, default
    depth), and how many gangs got one."""
    decisions = Scheduler().decide(snap)
    times, planned = [], 0
    for _ in range(repeat):
        gc.collect()
        started = time.process_time()
        planned = len(expected_starts(snap, decisions))
        times.append((time.process_time() - started) * 1000)
    return statistics.median(times), planned


def table(
    title: str, cases: list[tuple[int, int, int, int]], repeat: int, spread: str = "", preferred: bool = False
) -> None:
    """``cases``: (nodes, running pods, pending gangs, distinct pod shapes; 0: the uniform ones)."""
    print(f"\n### {title}\n")
    print("| nodes | running pods | pending gangs | pending pods | shapes | binds | cold ms | warm ms | full GC ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for nodes, running, pending, shapes in cases:
        built = snapshot(nodes, running, pending, shapes, spread, preferred=preferred)
        cold, warm, full, pods, binds = median_ms(built, repeat)
        shown = shapes or "uniform"
        row = f"| {nodes} | {running} | {pending} | {pods} | {shown} | {binds} | {cold:.2f} | {warm:.2f} | {full:.2f} |"
        print(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="targets only, no scaling tables")
    args = parser.parse_args()
    philly = philly_snapshot()
    cold, warm, full, pods, binds = median_ms(philly, args.repeat * 3)
    print("\n### Philly replay state\n")
    print("| nodes | running gangs | busy GPUs | pending gangs | pending pods | binds", end="")
    print(" | cold ms | warm ms | full GC ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    busy = sum(sum(m.requests.get(GPU, 0) for m in r.gang.members) for r in philly.running)
    counts = (len(philly.nodes), len(philly.running), busy, len(philly.pending), pods, binds)
    print("| " + " | ".join(str(c) for c in counts) + f" | {cold:.2f} | {warm:.2f} | {full:.2f} |")
    table(
        "Targets",
        [(56, 300, 10, 0), (1000, 5000, 2000, 0), (5000, 25000, 4200, 0)],
        args.repeat,
    )
    print("\n### Expected starts: the plan after a decision (depth 32, one decide() of its own)\n")
    print("| state | gangs given a start | CPU ms |")
    print("|---|---:|---:|")
    for name, snap in (
        ("Philly replay state", philly),
        ("1,000 nodes, 2,000 pending gangs", snapshot(1000, 5000, 2000)),
    ):
        spent, planned = expected_ms(snap, 3)
        print(f"| {name} | {planned} | {spent:.1f} |")
    varied = [(1000, 5000, 2000, 2000), (5000, 25000, 4200, 4200)]
    table("Targets, varied pod shapes", varied, args.repeat)
    table("Targets, varied pod shapes, every gang preferring pool a", varied, args.repeat, preferred=True)
    spread_cases = [(56, 300, 10, 0), (1000, 5000, 2000, 0)]
    table("Targets, gangs spread one pod per node", spread_cases, args.repeat, spread="node")
    table("Targets, gangs spread one pod per zone", spread_cases, args.repeat, spread="zone")
    table("Targets, gangs spread over zones with a skew of one", spread_cases, args.repeat, spread="skew")
    table("Targets, gangs kept in one zone", spread_cases, args.repeat, spread="together")
    if args.quick:
        return
    table(
        "Cost against nodes (2,000 pending gangs)",
        [(n, n * 5, 2000, 0) for n in (250, 500, 1000, 2000, 5000)],
        3,
    )
    table("Cost against pending gangs (1,000 nodes)", [(1000, 5000, g, 0) for g in (250, 500, 1000, 2000, 4000)], 3)
    table(
        "Cost against distinct pod shapes (1,000 nodes, 2,000 pending gangs)",
        [(1000, 5000, 2000, shapes) for shapes in (0, 10, 100, 1000, 2000)],
        3,
    )


if __name__ == "__main__":
    main()
