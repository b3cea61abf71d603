"""The railforge scheduler on a large cluster (issue 36 item 4): 5,000 API-only nodes x 8 GPUs, 20,000 running pods,
10,000 pending pods, in one run on one API server.

    python benchmarks/bench_k8s_large.py     # as root, after make setup; about 20 minutes on 2 cores

The running pods (one GPU each, four a node) are made bound (``spec.nodeName``) by no scheduler and stay for the
whole run: every contender sees the same half-full cluster. Then, on fresh pods each time, 10,000 one-GPU pods are
bound by (a) a bare loop of binding calls from 16 threads (the API server's ceiling here), (b) railforge, run as
its own process (``railforge scheduler run``, as the Deployment runs it), (c) kube-scheduler with its default
settings. binds/s are taken between the first and the last bind a watch sees, as in bench_k8s.py. Then one 512-pod
gang (a scheduler-plugins PodGroup) from the PodGroup's creation to every pod bound, railforge running and synced.

Of railforge's process (its own /metrics histograms): the passes that bound the pods, then STEADY_PASSES with
every pod bound, each with its mean pass and decide() time; its memory after them (VmRSS, and VmHWM: the peak).
The nodes have no kubelet and no KWOK: the status writes a kubelet would add for each bound pod are left out
for every contender alike. Prints Markdown tables and the load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.request

import yaml
from bench_k8s import (
    THREADS,
    BindWatch,
    add_nodes,
    apply_crds,
    bare_loop,
    create_pods,
    delete_pods,
    kube_scheduler_run,
    load_line,
    memory_mib,
    pod_body,
    rate,
    settings_mapping,
    submit_gang,
)
from prometheus_client.parser import text_string_to_metric_families

from railforge.cliargs import positive_int
from railforge.k8s.gangapis import SCHEDULER_PLUGINS
from railforge.testbed.controlplane import ControlPlane, create_namespace
from railforge.testbed.procs import Process, free_port, wait_for

RUNNING_PER_NODE = 4
RESYNC_SECONDS = 2.0
STEADY_PASSES = 5
SCRAPE_EVERY = 1.0  # seconds between the benchmark's reads of /metrics: each costs the scheduler's process a little
PASS, DECIDE = "railforge_pass_duration_seconds", "railforge_decide_duration_seconds"
BARE, RAILFORGE, KUBE_SCHEDULER = "bare loop of binding calls (16 threads)", "railforge", "kube-scheduler, defaults"


class Railforge:
    """``railforge scheduler run`` as a process of its own, for the pods naming ``name`` on the nodes of ``pool``;
    a pass at least every RESYNC_SECONDS."""

    def __init__(self, plane: ControlPlane, name: str, pool: str):
        settings = plane.directory / f"{name}-settings.yaml"
        settings.write_text(yaml.safe_dump({**settings_mapping(name, pool), "resync_seconds": RESYNC_SECONDS}))
        self.url = f"http://127.0.0.1:{free_port()}/metrics"
        argv = [sys.executable, "-m", "railforge.cli", "scheduler", "run", f"--kubeconfig={plane.admin_kubeconfig}"]
        argv += [f"--config={settings}", f"--http-address={self.url.split('/')[2]}", "--log-level=WARNING"]
        self.plane = plane
        self.process: Process = plane.launch(f"railforge-{name}", argv)

    def timed(self) -> dict[str, tuple[float, float]]:
        """(count, sum of seconds) of the pass and the decide() histograms."""
        with urllib.request.urlopen(self.url, timeout=10) as response:  # loopback only
            text = response.read().decode()
        samples = {
            sample.name: sample.value for family in text_string_to_metric_families(text) for sample in family.samples
        }
        return {
            histogram: (samples.get(f"{histogram}_count", 0.0), samples.get(f"{histogram}_sum", 0.0))
            for histogram in (PASS, DECIDE)
        }

    def passes(self) -> float:
        return self.timed()[PASS][0]

    def stop(self) -> None:
        self.plane.stop_component(self.process)


def means(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]) -> str:
    """Table cells: the passes between two readings, their mean time and their decide()'s, ms."""
    count = after[PASS][0] - before[PASS][0]
    pass_seconds, decide_seconds = (after[name][1] - before[name][1] for name in (PASS, DECIDE))
    return f"{count:.0f} | {pass_seconds / count * 1000:.0f} | {decide_seconds / count * 1000:.0f}"


def fill(plane: ControlPlane, nodes: list[str]) -> None:
    """RUNNING_PER_NODE one-GPU pods bound to each node at their creation, by no scheduler."""
    create_namespace(plane, "running")
    bodies = []
    for index in range(len(nodes) * RUNNING_PER_NODE):
        body = pod_body(f"r{index:05d}", "nobody")
        body["spec"]["nodeName"] = nodes[index // RUNNING_PER_NODE]
        bodies.append(body)
    create_pods(plane.api, "running", bodies)


def railforge_binds(plane: ControlPlane, namespace: str, pods: int, observed: dict) -> list[float]:
    """The bind times; ``observed`` gets the process's pass times (the passes that bound the pods; then STEADY_PASSES
    with every pod bound) and its memory after them."""
    create_pods(plane.api, namespace, [pod_body(f"p{i:05d}", namespace) for i in range(pods)])
    watch = BindWatch(plane, namespace)
    scheduler = Railforge(plane, namespace, "large")
    try:
        times = watch.wait(pods, 600)
        wait_for("the binding pass's end", lambda: scheduler.passes() > 0, 120, [scheduler.process], SCRAPE_EVERY)
        binding = scheduler.timed()
        done = binding[PASS][0] + STEADY_PASSES
        wait_for("passes with every pod bound", lambda: scheduler.passes() >= done, 120, interval=SCRAPE_EVERY)
        steady = scheduler.timed()
        zero = dict.fromkeys(steady, (0.0, 0.0))
        memory = memory_mib(scheduler.process.pid)
        observed.update(binding=means(zero, binding), steady=means(binding, steady), memory=memory)
        return times
    finally:
        scheduler.stop()


def gang(plane: ControlPlane, pods: int) -> tuple[float, float]:
    """(pods created, every pod bound) seconds after the PodGroup's creation, railforge running and synced."""
    namespace = "gang"
    create_namespace(plane, namespace)
    scheduler = Railforge(plane, namespace, "large")
    try:
        wait_for("railforge's first pass", lambda: scheduler.passes() > 0, 300, [scheduler.process])
        return submit_gang(plane, namespace, pods, SCHEDULER_PLUGINS, claims=False)
    finally:
        scheduler.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=positive_int, default=5000)
    parser.add_argument("--pending", type=positive_int, default=10000)
    parser.add_argument("--gang", type=positive_int, default=512)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_k8s_large: run as root (the test bed's control plane)", file=sys.stderr)
        return 2
    if args.pending > args.nodes * (8 - RUNNING_PER_NODE):
        print(f"bench_k8s_large: --pending {args.pending} one-GPU pods do not fit the free GPUs", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    binds: dict[str, float] = {}
    with ControlPlane.start() as plane:
        apply_crds(plane)
        started = time.monotonic()
        nodes = add_nodes(plane, "large", args.nodes, "large", threads=THREADS * 2)
        fill(plane, nodes)
        print(f"{args.nodes} nodes and {len(nodes) * RUNNING_PER_NODE} running pods in "
              f"{time.monotonic() - started:.0f} s", flush=True)  # fmt: skip
        observed: dict = {}
        runs = {
            BARE: lambda ns: bare_loop(plane, ns, nodes, args.pending),
            RAILFORGE: lambda ns: railforge_binds(plane, ns, args.pending, observed),
            KUBE_SCHEDULER: lambda ns: kube_scheduler_run(plane, ns, args.pending, None),
        }
        for index, (name, run) in enumerate(runs.items()):
            namespace = f"bench-{index}"
            create_namespace(plane, namespace)
            times = run(namespace)
            binds[name] = rate(times)
            print(f"{name}: {binds[name]:.0f} binds/s ({len(times)} pods in {times[-1] - times[0]:.1f} s)", flush=True)
            delete_pods(plane, namespace)
        created, bound = gang(plane, args.gang)
    load_after = os.getloadavg()
    running = args.nodes * RUNNING_PER_NODE
    print(f"\n| {args.nodes} nodes x 8 GPUs, {running} running pods, {args.pending} one-GPU pods pending | binds/s | "
          "vs bare loop | vs kube-scheduler defaults |")  # fmt: skip
    print("| --- | --- | --- | --- |")
    for name, value in binds.items():
        print(f"| {name} | {value:.0f} | {value / binds[BARE]:.2f}x | {value / binds[KUBE_SCHEDULER]:.2f}x |")
    print("\n| railforge's process | passes | pass, mean ms | its decide(), mean ms |")
    print("| --- | --- | --- | --- |")
    print(f"| the passes that bound the {args.pending} pods | {observed['binding']} |")
    print(f"| then, every pod bound (a pass every {RESYNC_SECONDS:.0f} s) | {observed['steady']} |")
    rss, peak = observed["memory"]
    print(f"\nrailforge's process: RSS {rss:.0f} MiB with every pod bound, peak {peak:.0f} MiB")
    print(f"one {args.gang}-pod gang: pods created {created:.2f} s, every pod bound {bound:.2f} s after its PodGroup")
    print(load_line(load_before, load_after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
