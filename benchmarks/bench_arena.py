"""The arena: the same jobs, on the same API server and the same KWOK nodes, for railforge and its peers.

    make arena        # as root, after make setup: python benchmarks/bench_arena.py (about 26 minutes on 2 cores)

One test-bed control plane, KWOK (railforge.testbed.kwok) managing --nodes fake 8-GPU nodes in leaves of 8 under
one spine; each pod runs its job's runtime once bound and then succeeds. Two workloads:

- a slice of the Philly trace (the simulator's loader; --traces-dir): --jobs consecutive jobs of 1+ GPUs from the
  --offset-th (by default 5.7 hours of the trace, 14 of them gangs of 9+ GPUs, about 220 GPUs busy on average), their
  submissions spread over --span seconds and their runtimes compressed alike, capped at --max-runtime; a job of
  more than 8 GPUs becomes a gang of 8-GPU pods;
- an adversarial mix: 24 one-GPU jobs submitted just before a gang of the whole cluster, then two gangs of
  three quarters of it each (together they deadlock a scheduler that binds pods one by one).

Contenders, each on fresh namespaces of the same server, one after another: railforge (PodGroups), kube-scheduler
with its defaults (lone pods), kube-scheduler with its own gangs (scheduling.k8s.io/v1alpha2 PodGroups, the
GenericWorkload and GangScheduling gates on), scheduler-plugins' kube-scheduler with coscheduling (the same
scheduling.x-k8s.io PodGroups as railforge), and Kueue in front of kube-scheduler's defaults (each job a suspended
batch/v1 Job in a LocalQueue of a ClusterQueue whose quota is the cluster's GPUs; railforge.testbed.kueue says how it
is configured). The peers are built from their pinned modules on the first run and cached. Not measured here: Volcano
and KAI-Scheduler, not served as Go modules here (KAI publishes a 512-pod gang on 512 nodes in 48.7 s).

Prints one Markdown table per workload (docs/arena.md explains the metrics) and the load average at the start and
the end. A metric is computed from the pods' own transitions, as a watch saw them.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
from pathlib import Path

from bench_k8s import apply_crds, load_line
from kubernetes import client

from railforge.bench.arena import Contender, Job, run, simulated, summary
from railforge.k8s.adapter import Adapter
from railforge.k8s.gangapis import NATIVE, SCHEDULER_PLUGINS
from railforge.k8s.settings import settings_from_mapping
from railforge.sim.traces import load_trace
from railforge.testbed import kueue
from railforge.testbed.build import ARENA_PEERS, TEST_IMAGE, build_component, go_env
from railforge.testbed.controlplane import ControlPlane, create_namespace
from railforge.testbed.kwok import add_fake_nodes, start_kwok
from railforge.testbed.procs import wait_for

ROOT = Path(__file__).resolve().parents[1]
GPUS_PER_NODE = 8
POOL = "railforge.bench/pool"
KUEUE_CLUSTER_QUEUE, KUEUE_QUEUE = "arena", "arena"  # one ClusterQueue of every GPU; a LocalQueue per namespace
METRICS = (
    ("completed", "jobs completed", "{:.0f}"),
    ("never_started", "never started", "{:.0f}"),
    ("mean_completion_s", "mean completion (s)", "{:.1f}"),
    ("p99_completion_s", "p99 completion (s)", "{:.1f}"),
    ("p99_wait_big_s", "p99 wait, 16+ GPUs (s)", "{:.1f}"),
    ("makespan_s", "makespan (s)", "{:.1f}"),
    ("gpu_utilisation", "GPU utilisation", "{:.2f}"),
    ("gangs_partly_bound", "gangs ever partly bound", "{:.0f}"),
    ("partly_bound_s", "partly bound, summed (s)", "{:.1f}"),
)


def trace_jobs(traces_dir: str, offset: int, count: int, span: float, max_runtime: float) -> list[Job]:
    """`count` consecutive jobs of 1+ GPUs from the `offset`-th, their submissions spread over `span` seconds and
    their runtimes compressed alike, capped at `max_runtime`."""
    try:
        trace = load_trace("philly", traces_dir)
    except FileNotFoundError as error:
        raise SystemExit(f"bench_arena: no trace file {error.filename} (--traces-dir)") from None
    records = [record for record in trace.jobs if record.gpus >= 1][offset : offset + count]
    if not records:
        raise SystemExit(f"bench_arena: the trace has no job of 1+ GPUs from the {offset}th (--offset)")
    start = records[0].submit
    compress = max(1e-9, records[-1].submit - start) / span
    return [
        Job(
            f"t{index:04d}",
            math.ceil(record.gpus / GPUS_PER_NODE),
            min(record.gpus, GPUS_PER_NODE),
            min(max_runtime, max(1.0, round(record.duration / compress, 1))),
            round((record.submit - start) / compress, 2),
        )
        for index, record in enumerate(records)
    ]


def adversarial_jobs(nodes: int) -> list[Job]:
    small = [Job(f"s{index:02d}", 1, 1, 20, index * 0.05) for index in range(24)]
    quarter = max(1, nodes * 3 // 4)
    return [
        *small,
        Job("whole", nodes, GPUS_PER_NODE, 20, 1.5),
        Job("big-a", quarter, GPUS_PER_NODE, 20, 2.0),
        Job("big-b", quarter, GPUS_PER_NODE, 20, 2.0),
    ]


def contend(plane: ControlPlane, workload: str, jobs: list[Job], contender: Contender, args) -> dict:
    """The contender's metrics for the workload, in a namespace of its own; its pods are deleted afterwards."""
    namespace = f"{workload}-{contender.slug}"
    create_namespace(plane, namespace)
    if contender.queue is not None:
        kueue.add_local_queue(plane, namespace, contender.queue, KUEUE_CLUSTER_QUEUE)
    observed = run(plane.api, namespace, jobs, contender, TEST_IMAGE, args.timeout)
    # the Jobs first (Kueue's), so that none makes its pods again
    client.BatchV1Api(plane.api).delete_collection_namespaced_job(namespace, propagation_policy="Background")
    client.CoreV1Api(plane.api).delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    return summary(jobs, observed, args.nodes * GPUS_PER_NODE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--offset", type=int, default=50500, help="the first trace job of the slice")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--span", type=float, default=120, help="seconds the slice's submissions spread over")
    parser.add_argument("--max-runtime", type=float, default=60, help="seconds a job runs at most")
    parser.add_argument("--timeout", type=float, default=360, help="seconds each contender has per workload")
    parser.add_argument("--traces-dir", default=str(ROOT.parent / "shared/traces"))
    parser.add_argument(
        "--logs",
        help="a directory to keep the log of each peer's programs in, as WORKLOAD-CONTENDER-PROGRAM.log",
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_arena: run as root (the test bed's control plane)", file=sys.stderr)
        return 2
    workloads = {
        f"philly-{args.offset}-{args.jobs}": trace_jobs(
            args.traces_dir, args.offset, args.jobs, args.span, args.max_runtime
        ),
        "adversarial": adversarial_jobs(args.nodes),
    }
    settings = settings_from_mapping(
        {"scheduler_name": "railforge", "node_selector": f"{POOL}=arena", "leader_election": {"enabled": False}}
    )
    for peer in ARENA_PEERS:
        build_component(peer, go_env())  # cached after the first run
    if args.logs:
        Path(args.logs).mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    results: dict[str, dict[str, dict]] = {}
    with ControlPlane.start() as plane:
        apply_crds(plane)
        kwok = start_kwok(plane, plane.directory / "kwok")
        kueue.apply_crds(plane)
        kueue.add_cluster_queue(plane, KUEUE_CLUSTER_QUEUE, args.nodes * GPUS_PER_NODE)
        for index in range(args.nodes):
            labels = {POOL: "arena", "railforge.io/leaf": f"leaf-{index // 8:02d}", "railforge.io/spine": "spine-0"}
            resources = {"nvidia.com/gpu": str(GPUS_PER_NODE), "cpu": "128", "memory": "2Ti"}
            add_fake_nodes(plane, [f"fake-{index:04d}"], resources, labels)
        listed = client.CoreV1Api(plane.api).list_node(label_selector=f"{POOL}=arena").items
        nodes = [plane.api.sanitize_for_serialization(node) for node in listed]  # for the simulator
        try:
            for workload, jobs in workloads.items():
                results[workload] = {}
                adapter = Adapter(plane.client(), settings).start()
                wait_for("railforge's caches", adapter.synced, 60)
                try:
                    gangs = Contender("railforge", "railforge", SCHEDULER_PLUGINS)
                    results[workload]["railforge"] = contend(plane, workload, jobs, gangs, args)
                finally:
                    adapter.stop()
                observed = simulated(jobs, nodes, settings)
                results[workload]["railforge, simulated"] = summary(jobs, observed, args.nodes * GPUS_PER_NODE)
                peers = (
                    (Contender("kube-scheduler defaults", "default-scheduler", None), plane.start_scheduler),
                    (
                        Contender("kube-scheduler native gangs", "default-scheduler", NATIVE),
                        lambda: plane.start_scheduler(native_gangs=True),
                    ),
                    (
                        Contender("coscheduling", "default-scheduler", SCHEDULER_PLUGINS),
                        plane.start_coscheduling_scheduler,
                    ),
                    (Contender("Kueue", "default-scheduler", None, KUEUE_QUEUE), plane.start_scheduler),
                )
                for contender, start in peers:
                    processes = [start()]
                    try:
                        if contender.queue is not None:
                            processes.append(kueue.start_kueue(plane, plane.directory / "kueue"))
                        results[workload][contender.name] = contend(plane, workload, jobs, contender, args)
                    finally:
                        for process in reversed(processes):
                            plane.stop_component(process)
                            if args.logs:  # moved: the next start of the same program begins a log of its own
                                log = Path(args.logs) / f"{workload}-{contender.slug}-{process.name}.log"
                                shutil.move(process.log, log)
        finally:
            kwok.stop()
    load_after = os.getloadavg()
    for workload, by_contender in results.items():
        print(f"\n{workload}: {len(workloads[workload])} jobs on {args.nodes} KWOK nodes x {GPUS_PER_NODE} GPUs")
        print("| metric | " + " | ".join(by_contender) + " |")
        print("| --- |" + " --- |" * len(by_contender))
        for key, label, form in METRICS:
            print(f"| {label} | " + " | ".join(form.format(metrics[key]) for metrics in by_contender.values()) + " |")
    print(load_line(load_before, load_after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
