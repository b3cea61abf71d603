"""The railforge scheduler against the real API server, beside the upstream kube-scheduler and a bare loop of binds.

    python benchmarks/bench_k8s.py            # as root, after make setup; about 3-5 minutes on 2 cores

One control plane for the whole run (so the ratios are measured on the same API server), on API-only nodes:

1. binds/s, 1,000 one-GPU pods on 125 nodes x 8 GPUs, for (a) a bare loop of binding calls from 16 threads over
   pooled connections (the API server's ceiling here), (b) railforge, (c) kube-scheduler with its default
   settings, (d) kube-scheduler with client QPS and burst raised to 5,000. The pods exist before each scheduler
   starts; a watch notes when each pod is seen bound, and the rate is taken between the first and the last
   bind, so start-up and cache sync are left out for every contender alike.
   Then (e) railforge again with a DRA claim on every pod: one GPU of the DGX-shaped stand-in's ResourceSlices
   (railforge.testbed.draslices) in a ResourceClaim of its own, made before the pods; each is allocated and
   reserved (two writes) before its pod is bound.
2. one 512-pod gang (64 nodes x 8 GPUs, one GPU per pod): PodGroup creation -> every pod bound, railforge
   running; pod creation (16 threads) is inside that time. Once with a scheduler-plugins PodGroup, once with a
   Kubernetes one (scheduling.k8s.io, which the test bed's API server serves), once with a scheduler-plugins
   PodGroup and a claim on every pod (the claims made before the PodGroup, outside the time), on nodes of their own.

Prints Markdown tables and the load average at the start and the end: timings taken while other work runs on the
machine are noisy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kubernetes import client
from urllib3.exceptions import ProtocolError

from railforge.k8s import CRD_DIR, dra, rest
from railforge.k8s.adapter import Adapter
from railforge.k8s.gangapis import NATIVE, SCHEDULER_PLUGINS, GangApi
from railforge.k8s.settings import settings_from_mapping
from railforge.testbed import draslices
from railforge.testbed.build import TEST_IMAGE, component
from railforge.testbed.controlplane import ControlPlane, add_api_node, create_namespace
from railforge.testbed.procs import wait_for

GPU = "nvidia.com/gpu"
CLAIMED = "railforge, a DRA claim on every pod"
POOL = "railforge.bench/pool"
NODE_ALLOCATABLE = {GPU: "8", "cpu": "64", "memory": "512Gi"}  # an API-only node of bench_k8s and bench_k8s_scale
THREADS = 16


def pod_body(name: str, scheduler: str, gpus: int = 1, labels: dict | None = None, claim: bool = False) -> dict:
    """A pod of ``gpus`` GPUs; with ``claim``, also the ResourceClaim of its own name (``claim_body``)."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": TEST_IMAGE,
                    "resources": {"requests": {GPU: str(gpus), "cpu": "10m"}, "limits": {GPU: str(gpus)}},
                }
            ],
        },
    }
    if claim:
        body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
    return body


def claim_body(name: str) -> dict:
    request = {"name": "gpu", "exactly": {"deviceClassName": draslices.GPU_DRIVER}}
    return {"metadata": {"name": name}, "spec": {"devices": {"requests": [request]}}}


def create_claims(api, namespace: str, names: list[str]) -> None:
    path = f"{dra.API}/namespaces/{namespace}/resourceclaims"
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda name: rest.call(api, "POST", path, body=claim_body(name)), names))


def publish_devices(plane: ControlPlane, nodes: list[str]) -> None:
    """The stand-in's DeviceClasses (once) and each node's ResourceSlices."""
    bodies = [body for node in nodes for body in draslices.node_slice(node)]
    with contextlib.suppress(client.ApiException):
        for body in draslices.device_classes():
            rest.call(plane.api, "POST", f"{dra.API}/deviceclasses", body=body)
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda body: rest.call(plane.api, "POST", f"{dra.API}/resourceslices", body=body), bodies))


def create_pods(api, namespace: str, bodies: list[dict]) -> None:
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda body: rest.call(api, "POST", f"/api/v1/namespaces/{namespace}/pods", body=body), bodies))


class BindWatch:
    """Watches a namespace's bound pods (field selector spec.nodeName!=, so a pod appears once it is bound); notes
    the monotonic time each is first seen, leaving out pods being deleted. A watch the API server ends (a slow
    reader under load) is resumed from the last resourceVersion seen."""

    def __init__(self, plane: ControlPlane, namespace: str):
        self.api = plane.client()
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.bound: dict[str, float] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.version = rest.call(self.api, "GET", self.path, query=[("limit", "1")])["metadata"]["resourceVersion"]
        self.response = self._open()  # before the thread starts: nothing bound after __init__ is missed
        self.thread.start()

    def _open(self):
        query = [("watch", "true"), ("resourceVersion", self.version), ("allowWatchBookmarks", "true")]
        query.append(("fieldSelector", "spec.nodeName!="))
        return rest.open_request(self.api, "GET", self.path, query=query, timeout=(10, 600))

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                for line in rest.stream_lines(self.response):
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        raise RuntimeError(f"watch of {self.path} failed: {event['object'].get('message')}")
                    meta = event["object"]["metadata"]
                    self.version = meta["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED") and not meta.get("deletionTimestamp"):
                        self.bound.setdefault(meta["name"], time.monotonic())
                if not self.stopping.is_set():
                    self.response = self._open()
        except ProtocolError:
            if not self.stopping.is_set():
                raise
        finally:
            self.api.close()

    def wait(self, count: int, timeout: float, stop: bool = True) -> list[float]:
        """The bind times once ``count`` pods are bound (then the watch ends, unless ``stop`` is false)."""
        wait_for(f"{count} pods bound", lambda: len(self.bound) >= count, timeout)
        if stop:
            self.stop()
        return sorted(self.bound.values())

    def stop(self) -> None:
        self.stopping.set()
        self.response.response.shutdown()  # ends the stream at once; the thread closes its client
        self.thread.join(10)


def rate(times: list[float]) -> float:
    return (len(times) - 1) / (times[-1] - times[0])


def delete_pods(plane: ControlPlane, namespace: str) -> None:
    core = client.CoreV1Api(plane.api)
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    wait_for(f"{namespace}'s pods gone", lambda: not core.list_namespaced_pod(namespace, limit=1).items, 120)


def bare_loop(plane: ControlPlane, namespace: str, nodes: list[str], pods: int) -> list[float]:
    create_pods(plane.api, namespace, [pod_body(f"p{i:04d}", "nobody") for i in range(pods)])
    watch = BindWatch(plane, namespace)
    api = plane.client()
    api.rest_client.pool_manager.connection_pool_kw["maxsize"] = THREADS
    api.rest_client.pool_manager.clear()

    def bind(index: int) -> None:
        name = f"p{index:04d}"
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": nodes[index // 8]},
        }
        rest.call(api, "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body=body)

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(bind, range(pods)))
    api.close()
    return watch.wait(pods, 120)


def railforge_run(plane: ControlPlane, namespace: str, pods: int, pool: str, claims: bool = False) -> list[float]:
    names = [f"p{i:04d}" for i in range(pods)]
    if claims:
        create_claims(plane.api, namespace, names)
    create_pods(plane.api, namespace, [pod_body(name, namespace, claim=claims) for name in names])
    watch = BindWatch(plane, namespace)
    api = plane.client()
    adapter = Adapter(api, settings_for(namespace, pool)).start()
    try:
        return watch.wait(pods, 300)
    finally:
        adapter.stop()
        api.close()


def settings_mapping(name: str, pool: str) -> dict:
    """A railforge scheduler named ``name`` for the nodes of ``pool``, as its settings file holds it."""
    return {
        "scheduler_name": name,
        "node_selector": f"{POOL}={pool}",
        "leader_election": {"enabled": False},
        "event_interval_seconds": 60,
    }


def settings_for(name: str, pool: str):
    return settings_from_mapping(settings_mapping(name, pool))


def kube_scheduler_run(plane: ControlPlane, namespace: str, pods: int, qps: int | None) -> list[float]:
    create_pods(plane.api, namespace, [pod_body(f"p{i:04d}", "default-scheduler") for i in range(pods)])
    watch = BindWatch(plane, namespace)
    # qps None: the upstream defaults (client QPS 50, burst 100)
    process = (
        plane.start_scheduler()
        if qps is None
        else plane.start_configured_scheduler(
            "scheduler-qps", "kube-scheduler", {"clientConnection": {"qps": qps, "burst": qps}}
        )
    )
    try:
        return watch.wait(pods, 600)
    finally:
        plane.stop_component(process)


def gang_run(
    plane: ControlPlane, namespace: str, pods: int, gangs: GangApi, claims: bool = False
) -> tuple[float, float]:
    """(pods created, all bound) seconds after the PodGroup's (of the ``gangs`` API) creation, railforge running and
    synced; with ``claims``, a ResourceClaim a pod made before."""
    if claims:
        create_claims(plane.api, namespace, [f"g{i:03d}" for i in range(pods)])
    api = plane.client()
    adapter = Adapter(api, settings_for(namespace, namespace)).start()
    try:
        wait_for("railforge synced", adapter.synced, 60)
        return submit_gang(plane, namespace, pods, gangs, claims)
    finally:
        adapter.stop()
        api.close()


def submit_gang(plane: ControlPlane, namespace: str, pods: int, gangs: GangApi, claims: bool) -> tuple[float, float]:
    """A PodGroup of ``pods`` pods, then its pods (with ``claims``, each naming the claim of its name): (pods created,
    all bound) seconds after the PodGroup's creation."""
    watch = BindWatch(plane, namespace)
    started = time.monotonic()
    client.CustomObjectsApi(plane.api).create_namespaced_custom_object(
        gangs.group, gangs.version, namespace, "podgroups", gangs.podgroup("gang", pods)
    )
    labels, fields = gangs.joining("gang")
    bodies = [pod_body(f"g{i:03d}", namespace, labels=labels, claim=claims) for i in range(pods)]
    for body in bodies:
        body["spec"].update(fields)
    create_pods(plane.api, namespace, bodies)
    created = time.monotonic() - started
    times = watch.wait(pods, 300)
    return created, times[-1] - started


def apply_crds(plane: ControlPlane) -> None:
    """The PodGroup CRD of the pinned mpi-operator release and our Queue CRD."""
    plane.apply_crds(
        [component("mpi-operator").out_dir / "scheduling.x-k8s.io_podgroups.yaml", CRD_DIR / "queues.railforge.io.yaml"]
    )


def add_nodes(plane: ControlPlane, prefix: str, count: int, pool: str, threads: int = 8) -> list[str]:
    """``count`` API-only nodes; each waits for the node lifecycle controller to lift its taints, so thousands need
    more ``threads``."""
    names = [f"{prefix}-{i:04d}" for i in range(count)]
    with ThreadPoolExecutor(threads) as pool_threads:
        list(pool_threads.map(lambda name: add_api_node(plane, name, NODE_ALLOCATABLE, labels={POOL: pool}), names))
    return names


def memory_mib(pid: int | str = "self") -> tuple[float, float]:
    """(RSS now, peak RSS) of a process (this one unless ``pid``), MiB."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in status if ":" in line)
    rss, peak = (int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM"))
    return rss, peak


def load_line(before: tuple[float, ...], after: tuple[float, ...]) -> str:
    """The machine's load averages around a run: the numbers are only comparable at similar load."""
    return f"load average (1/5/15 min) before: {' '.join(f'{v:.2f}' for v in before)}; after: " + " ".join(
        f"{v:.2f}" for v in after
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--gang", type=int, default=512)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_k8s: run as root (the test bed's control plane)", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    results: dict[str, float] = {}
    with ControlPlane.start() as plane:
        apply_crds(plane)
        node_count = args.pods // 8
        nodes = add_nodes(plane, "flat", node_count, "flat")
        publish_devices(plane, nodes)
        contenders = {
            "bare loop of binding calls (16 threads)": lambda ns: bare_loop(plane, ns, nodes, args.pods),
            "railforge": lambda ns: railforge_run(plane, ns, args.pods, "flat"),
            "kube-scheduler, default settings": lambda ns: kube_scheduler_run(plane, ns, args.pods, None),
            "kube-scheduler, client QPS/burst 5000": lambda ns: kube_scheduler_run(plane, ns, args.pods, 5000),
            CLAIMED: lambda ns: railforge_run(plane, ns, args.pods, "flat", claims=True),
        }
        for index, (name, run) in enumerate(contenders.items()):
            namespace = f"bench-{index}"
            create_namespace(plane, namespace)
            times = run(namespace)
            results[name] = rate(times)
            print(
                f"{name}: {results[name]:.0f} binds/s ({len(times)} pods in {times[-1] - times[0]:.2f} s)", flush=True
            )
            delete_pods(plane, namespace)
        gang_nodes = args.gang // 8
        gangs = {}
        for label, namespace, gang_api, claims in (
            (SCHEDULER_PLUGINS.kind, "gang", SCHEDULER_PLUGINS, False),
            (NATIVE.kind, "gang-native", NATIVE, False),
            (f"{SCHEDULER_PLUGINS.kind}, a DRA claim on every pod", "gang-claims", SCHEDULER_PLUGINS, True),
        ):
            create_namespace(plane, namespace)
            gang_node_names = add_nodes(plane, namespace, gang_nodes, namespace)
            if claims:
                publish_devices(plane, gang_node_names)
            gangs[label] = gang_run(plane, namespace, args.gang, gang_api, claims)
    load_after = os.getloadavg()
    ceiling = results["bare loop of binding calls (16 threads)"]
    default = results["kube-scheduler, default settings"]
    header = f"{args.pods} one-GPU pods on {node_count} nodes x 8 GPUs"
    print(f"\n| {header} | binds/s | vs bare loop | vs kube-scheduler default |")
    print("| --- | --- | --- | --- |")
    for name, value in results.items():
        print(f"| {name} | {value:.0f} | {value / ceiling:.2f}x | {value / default:.2f}x |")
    print(f"\nDRA claims: railforge's binds/s {results[CLAIMED] / results['railforge']:.2f}x without them")
    print(f"\n| one {args.gang}-pod gang on {gang_nodes} nodes x 8 GPUs, from the PodGroup's creation | pods created "
          "(16 threads), s | every pod bound by railforge, s |")  # fmt: skip
    print("| --- | --- | --- |")
    for kind, (created, bound) in gangs.items():
        print(f"| {kind} | {created:.2f} | {bound:.2f} |")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nbenchmark process peak RSS (adapter, watches and clients together): {peak:.0f} MiB")
    print(load_line(load_before, load_after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
