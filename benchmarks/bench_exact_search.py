"""How far the exact placement search (``placement.ExactSearch``) proves what it finds; prints a Markdown table.

Run: PYTHONPATH=src python benchmarks/bench_exact_search.py [--instances N]

The search runs when the greedy fill misses a gang of several pod shapes. It treats nodes alike when
they have the same resources free, so its work grows with the number of distinct free states among
the nodes a gang may use (not with the number of nodes), with the gang's pods and with its shapes;
``EXACT_SEARCH_BUDGET`` bounds it. A search that runs out of budget proves nothing: the gang is not
declared unfit and waits with a capacity reason, to be tried again next cycle.

Each instance draws ``states`` free states (GPUs 0-8, 4-128 CPUs, 64-1,024 GiB of memory), one node
per state, and a gang of ``pods`` pods in ``shapes`` shapes (0-8 GPUs, 4-96 CPUs, 64-768 GiB per
pod), so that many instances fit barely or not at all: the searches that must look hardest. The
table gives, per size, the instances whose search ran out of budget, the most work one search did
(node states looked at) and its CPU time.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from railforge.scheduler import GPU
from railforge.scheduler.placement import EXACT_SEARCH_BUDGET, ExactSearch, Shape

# (distinct free states, shapes, pods): the sizes the scheduler core's docs quote
SIZES = [(states, shapes, pods) for states in (8, 16, 32, 64) for shapes in (2, 3) for pods in (4, 8, 16, 32)]


def instance(rng: random.Random, states: int, shapes: int, pods: int) -> tuple[list[Shape], dict[int, dict[str, int]]]:
    """(a random gang's pod shapes, ``states`` nodes' random free resources by node index)."""
    rooms = {
        index: {GPU: rng.choice((0, 1, 2, 4, 8)), "cpu": 4 * rng.randint(1, 32), "memory": 64 * rng.randint(1, 16)}
        for index in range(states)
    }
    counts = [1] * shapes
    for _ in range(pods - shapes):
        counts[rng.randrange(shapes)] += 1
    gang_shapes = []
    for shape, count in enumerate(counts):
        others = (("cpu", 4 * rng.randint(1, 24)), ("memory", 64 * rng.randint(1, 12)))
        names = tuple(f"s{shape}-{pod}" for pod in range(count))
        gang_shapes.append(Shape(rng.choice((0, 1, 2, 4, 8)), others, names))
    gang_shapes.sort(key=lambda shape: -shape.gpu)
    return gang_shapes, rooms


def measure(states: int, shapes: int, pods: int, instances: int, seed: int = 1) -> tuple[int, int, int, float, float]:
    """(out of budget, placed, most work, median ms, worst ms) over ``instances`` random instances."""
    rng = random.Random(f"{seed}-{states}-{shapes}-{pods}")
    out_of_budget = placed = most = 0
    times = []
    for _ in range(instances):
        search = ExactSearch(*instance(rng, states, shapes, pods))
        start = time.process_time()
        found = search.run()
        times.append((time.process_time() - start) * 1000)
        out_of_budget += not search.complete
        placed += found is not None
        most = max(most, EXACT_SEARCH_BUDGET - search.budget)
    return out_of_budget, placed, most, statistics.median(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=200)
    args = parser.parse_args()
    print(f"\nBudget: {EXACT_SEARCH_BUDGET:,} node states; {args.instances} random instances per row.\n")
    print("| free states | shapes | pods | out of budget | placed | most work | median ms | worst ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for states, shapes, pods in SIZES:
        out, placed, most, median, worst = measure(states, shapes, pods, args.instances)
        print(f"| {states} | {shapes} | {pods} | {out} | {placed} | {most:,} | {median:.2f} | {worst:.1f} |")


if __name__ == "__main__":
    main()
