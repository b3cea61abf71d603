"""The railforge scheduler at scale on the real API server: 1,000 API-only nodes x 8 GPUs, 2,000 gangs waiting.

    python benchmarks/bench_k8s_scale.py      # as root, after make setup; about 5-10 minutes on 2 cores

The cluster is filled by 1,000 one-pod 8-GPU gangs; then 2,000 one-pod gangs of 1, 2, 4 or 8 GPUs wait. Then three
kinds of event, ``--events`` times each, are each followed by the first bind they make possible: a filling pod is
deleted (its node frees); a node is added; a gang is added that only a spare node fits (tainted, its pod tolerates
it; deleted again once bound). Each time the adapter sees the change, passes (decide() over 1,000 nodes, 1,000
running and 2,000 pending gangs) and binds. For each kind it prints, as p50/p99/max:

* decision to first bind: from the decide() call that bound something returning to the first of its binds seen
  on a watch (the binding call, the API server, the watch);
* event to first bind: from the event's call returning to that first bind (adds the watch delivering the
  event, the minimum period between passes and decide() itself);
* decide() time of those passes.

And the memory of this process (the adapter with its caches, plus the benchmark's own watch and clients): RSS
now and its peak.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from bench_k8s import (
    NODE_ALLOCATABLE,
    POOL,
    BindWatch,
    add_nodes,
    apply_crds,
    create_pods,
    load_line,
    memory_mib,
    pod_body,
    settings_for,
)

from railforge.k8s import rest
from railforge.k8s.adapter import Adapter
from railforge.testbed.controlplane import ControlPlane, add_api_node, create_namespace
from railforge.testbed.procs import wait_for

SIZES = (1, 2, 4, 8)
QUIET_SECONDS = 5  # an event followed by no bind for this long counts as one that made nothing possible
SPARE = {"key": "railforge.bench/spare", "value": "true", "effect": "NoSchedule"}  # only the added gangs tolerate it


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered) * 1000:.0f} / {p99 * 1000:.0f} / {ordered[-1] * 1000:.0f}"


def timed_binds(
    count: int, trigger, watch: BindWatch, passes: list[tuple[float, float, int]]
) -> tuple[list[float], list[float], list[float], int]:
    """``trigger(event)`` ``count`` times, each followed by the first bind it makes possible: (event to first bind,
    decision to first bind, decide() of the pass that bound it) per event, and how many events led to no bind."""
    to_first_bind, decision_to_bind, decide_seconds = [], [], []
    quiet = 0
    for event in range(count):
        seen = set(watch.bound)
        trigger(event)
        happened = time.monotonic()
        try:
            wait_for("a bind after the event", lambda seen=seen: set(watch.bound) - seen, QUIET_SECONDS)
        except TimeoutError:
            quiet += 1  # it made nothing possible for a gang allowed to start now (order, reservations)
            continue
        first = min(watch.bound[pod] for pod in set(watch.bound) - seen)
        returned, seconds, _ = max(p for p in passes if p[2] and p[0] <= first)
        to_first_bind.append(first - happened)
        decision_to_bind.append(first - returned)
        decide_seconds.append(seconds)
        time.sleep(0.2)
    return to_first_bind, decision_to_bind, decide_seconds, quiet


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=2000)
    parser.add_argument("--events", type=int, default=100)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_k8s_scale: run as root (the test bed's control plane)", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    name = "scale"
    with ControlPlane.start() as plane:
        apply_crds(plane)
        started = time.monotonic()
        add_nodes(plane, name, args.nodes, name)
        print(f"{args.nodes} nodes added in {time.monotonic() - started:.0f} s", flush=True)
        create_namespace(plane, name)
        api = plane.client()
        adapter = Adapter(api, settings_for(name, name))
        decide = adapter.decide
        passes: list[tuple[float, float, int]] = []  # (returned, seconds, binds)

        def timed_decide(snapshot):
            began = time.monotonic()
            decisions = decide(snapshot)
            passes.append((time.monotonic(), time.monotonic() - began, len(decisions.binds)))
            return decisions

        adapter.decide = timed_decide
        adapter.start()
        try:
            fill = BindWatch(plane, name)
            create_pods(plane.api, name, [pod_body(f"fill-{i:04d}", name, gpus=8) for i in range(args.nodes)])
            fill.wait(args.nodes, 600)
            waiting = [pod_body(f"wait-{i:04d}", name, gpus=SIZES[i % len(SIZES)]) for i in range(args.pending)]
            create_pods(plane.api, name, waiting)
            wait_for(f"{args.pending} gangs pending", lambda: len(adapter.state.view().pending) == args.pending, 300)
            print(f"cluster full, {args.pending} gangs pending; memory now / peak: {memory_mib()}", flush=True)
            add_api_node(plane, "spare", NODE_ALLOCATABLE, labels={POOL: name}, taints=[SPARE])
            watch = BindWatch(plane, name)

            def delete(path: str) -> None:
                rest.call(api, "DELETE", f"/api/v1/namespaces/{name}/pods/{path}", body={"gracePeriodSeconds": 0})

            def add_gang(event: int) -> None:
                if event:  # the last one leaves the spare node, seen by the scheduler before the next is added
                    last = f"added-{event - 1:04d}"
                    delete(last)
                    wait_for(f"{last} gone", lambda: adapter.caches["pods"].get(name, last) is None, QUIET_SECONDS)
                body = pod_body(f"added-{event:04d}", name, gpus=8)
                body["spec"]["tolerations"] = [{**SPARE, "operator": "Equal"}]
                create_pods(plane.api, name, [body])

            kinds = {
                "pod deleted (its node freed)": lambda event: delete(f"fill-{event:04d}"),
                "node added": lambda event: add_api_node(
                    plane, f"added-{event:04d}", NODE_ALLOCATABLE, labels={POOL: name}
                ),
                "gang added (fits the spare node only)": add_gang,
            }
            results = {kind: timed_binds(args.events, trigger, watch, passes) for kind, trigger in kinds.items()}
            watch.stop()
        finally:
            adapter.stop()
            api.close()
        rss, peak = memory_mib()
    load_after = os.getloadavg()
    shape = f"{args.nodes} nodes x 8 GPUs, {args.pending} gangs pending, {args.events} events of each kind"
    print(f"\n{shape} (ms: p50 / p99 / max)")
    print("\n| event | event to first bind | decision to first bind | decide() of those passes | no bind |")
    print("| --- | --- | --- | --- | --- |")
    for kind, (to_first_bind, decision_to_bind, decide_seconds, quiet) in results.items():
        cells = [percentiles(values) if values else "-" for values in (to_first_bind, decision_to_bind, decide_seconds)]
        print(f"| {kind} | {' | '.join(cells)} | {quiet} |")
    print(f"\nprocess memory (adapter + the benchmark's watch and clients): RSS {rss:.0f} MiB, peak {peak:.0f} MiB")
    print(load_line(load_before, load_after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
