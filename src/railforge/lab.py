"""``railforge lab job``: the lab's last step. An MPIJob of the OpenMPI image (deploy/openmpi) is submitted to the
cluster, gang-scheduled by railforge through the MPI operator, followed to its end, and its launcher's log read
back: one line per MPI rank, a summary, and a table of which node ran what, with the devices each worker was given
and its address on the rail network. ``railforge lab device-plugins``: the fake GPUs and RDMA devices of one node.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import yaml

from railforge import labinventory
from railforge.cliargs import (
    UsageError,
    directory,
    k8s_name,
    kube_client,
    namespaced_name,
    non_negative_int,
    output_directory,
    path_component,
    positive_float,
    positive_int,
    quantity,
    text_file,
)

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy/openmpi/mpijob.yml.j2"
VERSIONS_FILE = ROOT / "roles/versions/defaults/main.yml"
HARDWARE_MARK = ".railforge-lab-hardware"  # in a tree `lab hardware` built: what a later run may replace
# The real ibdev2netdev of a DGX H100-style node whose names the lab workers' simulated hardware takes.
DGX_H100_LINKS = ROOT / "tests/fixtures/realdata/ibdev2netdev/dgx-h100-style-8ib-ibpXXs0-3eth-cnode3-011.txt"
# The lines allreduce (deploy/openmpi/allreduce.c) prints: one per rank, then rank 0's summary.
RANK_LINE = re.compile(r"^rank=(\d+) host=(\S+) bytes=(\d+) result=(ok|FAIL) time_s=([0-9.]+)$", re.M)
SUMMARY_LINE = re.compile(
    r"^summary ranks=(\d+) bytes=(\d+) iterations=(\d+) time_s=([0-9.]+) algbw_GBps=([0-9.]+) "
    r"busbw_GBps=([0-9.]+) result=(ok|FAIL)$",
    re.M,
)
# The line a worker prints first (mpijob.yml.j2): what the device plugins' Allocate put into its environment.
DEVICES_LINE = re.compile(r"^devices (.*)$", re.M)
JOB_ROLE = "training.kubeflow.org/job-role"
JOB_NAME = "training.kubeflow.org/job-name"
NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"  # Multus's record of a pod's interfaces
RAIL_INTERFACE = re.compile(r"^net\d+$")  # the interfaces Multus adds: net1, net2, ...
# The devices of a lab worker: (resource, count, the variable Allocate sets). The stand-in plays NVIDIA's device
# plugin (nvidia.com/gpu, NVIDIA_VISIBLE_DEVICES) and the RDMA shared device plugin (rdma/<rail>, rdma_env(rail)).
GPU = ("nvidia.com/gpu", "NVIDIA_VISIBLE_DEVICES")


def rdma_env(rail: str) -> str:
    """The variable the stand-in's Allocate sets to a container's rdma/<rail> devices: RAILFORGE_RDMA_<RAIL>."""
    return "RAILFORGE_RDMA_" + re.sub(r"\W", "_", rail.upper())


@dataclass(frozen=True)
class Rank:
    rank: int
    pod: str
    size: int
    ok: bool
    seconds: float


def parse_ranks(log: str) -> tuple[list[Rank], dict[str, str] | None]:
    """The rank lines and the summary (None when the launcher printed none) of an allreduce log."""
    ranks = [
        Rank(int(r), host, int(size), verdict == "ok", float(t)) for r, host, size, verdict, t in RANK_LINE.findall(log)
    ]
    summary = SUMMARY_LINE.search(log)
    keys = ("ranks", "bytes", "iterations", "time_s", "algbw_GBps", "busbw_GBps", "result")
    return ranks, dict(zip(keys, summary.groups(), strict=True)) if summary else None


def render_job(
    name: str,
    namespace: str,
    workers: int,
    worker_cpu: str,
    gpus: int = 1,
    rails: Sequence[str] = (),
    networks: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    image: str | None = None,
) -> dict:
    """Every worker requests ``gpus`` GPUs and one rdma/<rail> device of each of ``rails``, attaches each of
    ``networks`` (NetworkAttachmentDefinitions, "namespace/name"), has ``env`` and prints first what its devices and
    ``env`` are."""
    import jinja2  # the operator's tools only: not in the scheduler's image

    pins = yaml.safe_load(VERSIONS_FILE.read_text())
    template = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(TEMPLATE.read_text())
    text = template.render(
        job_name=name,
        job_namespace=namespace,
        image=image or pins["versions_openmpi_image"],
        workers=workers,
        slots_per_worker=1,
        worker_cpu=worker_cpu,
        gpus_per_worker=gpus,
        worker_resources={f"rdma/{rail}": 1 for rail in rails},
        worker_networks=list(networks),
        worker_env=dict(env or {}),
        device_env=[GPU[1], *map(rdma_env, rails), *sorted(env or {})],
    )
    return yaml.safe_load(text)


@dataclass(frozen=True)
class JobPod:
    name: str
    role: str
    node: str
    scheduler: str
    devices: str = ""  # the worker's DEVICES_LINE, once read
    rail_addresses: tuple[str, ...] = ()  # its first address on each RAIL_INTERFACE, in order


def rail_addresses(annotations: dict[str, str] | None) -> tuple[str, ...]:
    """The pod's first address on each interface Multus added (net1, net2, ...), from its network-status
    annotation."""
    status = json.loads((annotations or {}).get(NETWORK_STATUS, "[]"))
    return tuple(
        entry["ips"][0] for entry in status if RAIL_INTERFACE.match(entry.get("interface", "")) and entry.get("ips")
    )


def node_table(pods: list[JobPod], ranks: list[Rank]) -> list[tuple[str, ...]]:
    """(node, pods with their roles, ranks, devices, rail addresses, verdict) per node that ran a pod of the job."""
    by_node: dict[str, list[JobPod]] = {}
    for pod in pods:
        by_node.setdefault(pod.node or "(unbound)", []).append(pod)
    rows: list[tuple[str, ...]] = []
    for node, members in sorted(by_node.items()):
        mine = [rank for rank in ranks if rank.pod in {pod.name for pod in members}]
        roles = ", ".join(f"{pod.name} ({pod.role})" for pod in sorted(members, key=lambda pod: pod.name))
        verdict = "ok" if mine and all(rank.ok for rank in mine) else ("FAIL" if mine else "-")
        devices = " ".join(pod.devices for pod in members if pod.devices) or "-"
        addresses = " ".join(",".join(pod.rail_addresses) for pod in members if pod.rail_addresses) or "-"
        rows.append((node, roles, " ".join(str(rank.rank) for rank in mine) or "-", devices, addresses, verdict))
    return rows


def diagnosis(nodes: list, pods: list, events: list) -> list[str]:
    """Why a job may not have run, from kubernetes client objects: each node's pressure conditions and taints, each
    pod that is not running or done (with the reason it waits), the newest events of the job's namespace."""
    lines = []
    for node in nodes:
        conditions = [c.type for c in node.status.conditions or [] if (c.status == "True") != (c.type == "Ready")]
        taints = [f"{t.key}:{t.effect}" for t in node.spec.taints or []]
        lines.append(f"node {node.metadata.name}: not ok {conditions or '-'}, taints {taints or '-'}")
    for pod in pods:
        if pod.status.phase in ("Running", "Succeeded"):
            continue
        waits = [
            f"{c.type} {c.reason}: {c.message}" for c in pod.status.conditions or [] if c.status != "True" and c.reason
        ]
        waits += [
            f"{s.name} {s.state.waiting.reason}: {s.state.waiting.message}"
            for s in pod.status.container_statuses or []
            if s.state and s.state.waiting
        ]
        where = pod.spec.node_name or "unbound"
        lines.append(f"pod {pod.metadata.namespace}/{pod.metadata.name} {pod.status.phase} ({where}): {waits or '-'}")
    newest = sorted(events, key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)[-15:]
    lines += [f"event {e.involved_object.kind}/{e.involved_object.name} {e.reason}: {e.message}" for e in newest]
    return lines


def run_job(
    api,
    namespace: str,
    name: str,
    workers: int,
    worker_cpu: str,
    gpus: int,
    rails: Sequence[str],
    networks: Sequence[str],
    nccl_config: str | None,
    timeout: float,
) -> int:
    """Submit the job (each worker: ``gpus`` GPUs, a device of each rail, an interface on each network, the data of
    the ConfigMap ``nccl_config`` ("namespace/name": the node class's NCCL settings) in its environment), follow it to
    its end and print where it ran; 0 when it proved the chain."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    try:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    except ApiException as error:
        if error.status != 409:
            raise
    group, version, plural = "kubeflow.org", "v2beta1", "mpijobs"
    try:
        custom.delete_namespaced_custom_object(group, version, namespace, plural, name, propagation_policy="Foreground")
        while True:  # a job of the same name from an earlier run: gone before the new one starts
            custom.get_namespaced_custom_object(group, version, namespace, plural, name)
            time.sleep(1)
    except ApiException as error:
        if error.status != 404:
            raise
    env = {}
    if nccl_config:
        config_namespace, config_name = nccl_config.split("/", 1)
        env = core.read_namespaced_config_map(config_name, config_namespace).data or {}
    submitted = time.monotonic()
    job = render_job(name, namespace, workers, worker_cpu, gpus, rails, networks, env)
    custom.create_namespaced_custom_object(group, version, namespace, plural, job)
    print(f"lab: MPIJob {namespace}/{name} submitted: {workers} workers, gang-scheduled by railforge", flush=True)
    state: str | None = None
    seen: dict[str, JobPod] = {}  # the job's pods as they were bound: the operator deletes the workers at the end
    while time.monotonic() - submitted < timeout:
        for pod in core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME}={name}").items:
            meta, spec = pod.metadata, pod.spec
            if meta is None or meta.name is None or spec is None or not spec.node_name:
                continue
            known = seen.get(meta.name)
            role = (meta.labels or {}).get(JOB_ROLE, "?")
            devices = known.devices if known else ""
            if not devices and role == "worker" and pod.status is not None and pod.status.phase == "Running":
                found = DEVICES_LINE.search(core.read_namespaced_pod_log(meta.name, namespace))
                devices = found.group(1) if found else ""
            seen[meta.name] = JobPod(
                meta.name, role, spec.node_name, spec.scheduler_name or "", devices, rail_addresses(meta.annotations)
            )
        # a custom object comes back as its decoded JSON
        job_object = cast(dict, custom.get_namespaced_custom_object(group, version, namespace, plural, name))
        status = job_object.get("status", {})
        ended = [c["type"] for c in status.get("conditions", []) if c["type"] in ("Succeeded", "Failed")]
        if ended and next(c for c in status["conditions"] if c["type"] == ended[0])["status"] == "True":
            state = ended[0]
            break
        time.sleep(2)
    elapsed = time.monotonic() - submitted
    pods = list(seen.values())
    launcher = [pod for pod in pods if pod.role == "launcher"]
    log = core.read_namespaced_pod_log(launcher[0].name, namespace) if launcher else ""
    ranks, summary = parse_ranks(log)
    print(f"lab: MPIJob {state or 'did not end'} after {elapsed:.1f} s; launcher log:\n{log.rstrip()}")
    rows = [("node", "pods (role)", "ranks", "devices", "rail addresses", "result"), *node_table(pods, ranks)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    worker_pods = [pod for pod in pods if pod.role == "worker"]
    worker_nodes = {pod.node for pod in worker_pods}
    schedulers = {pod.scheduler for pod in pods}
    print(f"lab: bound by {', '.join(sorted(schedulers))}; {len(worker_nodes)} worker nodes")
    good = (
        state == "Succeeded"
        and summary is not None
        and summary["result"] == "ok"
        and len(ranks) == workers
        and all(rank.ok for rank in ranks)
        and len(worker_nodes) == workers
        and schedulers == {"railforge"}
        and all(pod.devices for pod in worker_pods)
        and all(len(set(pod.rail_addresses)) == len(networks) for pod in worker_pods)
        and len({address for pod in worker_pods for address in pod.rail_addresses}) == workers * len(networks)
        and all(f"{key}={value}" in pod.devices.split() for pod in worker_pods for key, value in env.items())
    )
    if not good:
        print(
            f"lab: the job did not prove the chain: state {state}, {len(ranks)} of {workers} ranks, workers on "
            f"{len(worker_nodes)} nodes, schedulers {sorted(schedulers)}, summary {summary}, workers' devices and rail "
            f"addresses {[(pod.devices, pod.rail_addresses) for pod in worker_pods]}",
            file=sys.stderr,
        )
        nodes, every_pod = core.list_node().items, core.list_pod_for_all_namespaces().items
        for line in diagnosis(nodes, every_pod, core.list_namespaced_event(namespace).items):
            print(f"lab: {line}", file=sys.stderr)
    return 0 if good else 1


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("lab", help="the lab cluster of `make lab`")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    job = actions.add_parser("job", help="run the allreduce MPIJob across the lab's workers and print where it ran")
    job.add_argument("--kubeconfig", type=text_file, required=True)
    job.add_argument("--namespace", type=k8s_name, default="railforge-lab")
    job.add_argument("--name", type=k8s_name, default="allreduce")
    job.add_argument("--workers", type=positive_int, default=2)
    # Small enough that two workers fit one lab node by CPU: the template's pod anti-affinity keeps them apart (and
    # the GPUs they ask, when a worker asks a node's all, as lab.sh's job does; tests/lab's idle jobs ask none).
    job.add_argument("--worker-cpu", type=quantity, default="300m")
    job.add_argument("--gpus", type=non_negative_int, default=1, help="nvidia.com/gpu each worker requests")
    job.add_argument(
        "--rail", type=path_component, action="append", default=[], help="each worker requests one rdma/RAIL device"
    )
    job.add_argument(
        "--network",
        type=namespaced_name,
        action="append",
        default=[],
        help="a NetworkAttachmentDefinition (namespace/name) each worker attaches (repeatable)",
    )
    job.add_argument(
        "--nccl-config", type=namespaced_name, help="the ConfigMap (namespace/name) of NCCL settings the workers get"
    )
    job.add_argument("--timeout", type=positive_float, default=300)
    job.set_defaults(
        func=lambda args: run_job(
            kube_client(args.kubeconfig),
            args.namespace,
            args.name,
            args.workers,
            args.worker_cpu,
            args.gpus,
            args.rail,
            args.network,
            args.nccl_config,
            args.timeout,
        )
    )
    plugins = actions.add_parser(
        "device-plugins",
        help="serve fake GPUs and RDMA devices to a node container's kubelet from this host until SIGTERM",
    )
    plugins.add_argument(
        "--plugin-dir", type=directory, required=True, help="bind-mounted as the node's device-plugins"
    )
    plugins.add_argument(
        "--state-dir", type=output_directory, required=True, help="the device files, at this path in the node"
    )
    plugins.add_argument("--gpus", type=non_negative_int, default=2)
    plugins.add_argument(
        "--rail", type=path_component, action="append", default=[], help="an rdma/<RAIL> resource (repeatable)"
    )
    plugins.add_argument(
        "--rdma-slots", type=positive_int, default=4, help="rdma/<RAIL> devices each (shared HCA slots)"
    )
    plugins.set_defaults(func=serve_device_plugins)
    hardware = actions.add_parser(
        "hardware", help="build a DGX H100-shaped simulated sysfs tree and print its netdevs, one per line"
    )
    hardware.add_argument(
        "root",
        type=output_directory,
        help="the tree's root, replaced when an earlier run built it (the node's hw_root)",
    )
    hardware.add_argument(
        "--ibdev2netdev", type=text_file, default=DGX_H100_LINKS, help="the ibdev2netdev output it takes names from"
    )
    hardware.set_defaults(func=build_hardware)
    inventory = actions.add_parser(
        "inventory", help="write the lab's inventory: the example's, cut to the lab's hosts, plus the lab overlay"
    )
    inventory.add_argument("--out", type=output_directory, default=labinventory.OVERLAY.parent)
    inventory.add_argument("--example", type=directory, default=labinventory.EXAMPLE)
    inventory.add_argument("--overlay", type=text_file, default=labinventory.OVERLAY)
    inventory.add_argument(
        "--machine-vars", type=text_file, help="this machine's stand-in settings (YAML), held to the overlay's rules"
    )
    inventory.set_defaults(func=write_inventory)


def write_inventory(args: argparse.Namespace) -> int:
    written = labinventory.generate(
        args.out, example=args.example, overlay_path=args.overlay, machine_vars=args.machine_vars
    )
    print(*written, sep="\n")
    return 0


def build_hardware(args: argparse.Namespace) -> int:
    """A lab worker's hardware: the DGX H100 shape with the RDMA device and netdev names of a real ibdev2netdev
    (railforge.hwsim), built afresh under ``root``; its netdevs are printed for the node to get netdevs so named."""
    from railforge import hwsim, plugin_code

    hwparse = plugin_code.load("module_utils/railforge_hwparse.py")
    try:
        links = hwparse.parse_ibdev2netdev(hwsim.fixture_body(args.ibdev2netdev.read_text()))
    except ValueError as error:  # not a fixture, or not ibdev2netdev (the parser's ParseError is a ValueError)
        raise UsageError(f"--ibdev2netdev {args.ibdev2netdev}: {error}") from None
    root: Path = args.root
    if root.exists() and not (root / HARDWARE_MARK).is_file() and any(root.iterdir()):
        # never remove what this command did not build
        raise UsageError(f"root {root}: a directory `railforge lab hardware` did not build; choose another")
    shutil.rmtree(root, ignore_errors=True)
    try:
        hwsim.build(root, hwsim.dgx_h100(links))
        (root / HARDWARE_MARK).write_text("built by `railforge lab hardware`: replaced by its next run\n")
    except OSError as error:
        raise UsageError(f"root {root}: cannot build the tree there ({error.strerror})") from None
    print(*sorted(link["netdev"] for link in links), sep="\n")
    return 0


def serve_device_plugins(args: argparse.Namespace) -> int:
    """The stand-in for NVIDIA's device plugin and the RDMA shared device plugin on one lab node; it registers
    again whenever the kubelet restarts (FakeDevicePlugin watches the kubelet's socket)."""
    import grpc

    from railforge.testbed.deviceplugin import FakeDevicePlugin

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    resources = [(GPU[0], args.gpus, GPU[1])] + [
        (f"rdma/{rail}", args.rdma_slots, rdma_env(rail)) for rail in args.rail
    ]
    plugins = []
    try:
        for resource, count, env in resources:
            # absolute: gRPC's unix: addresses take no relative path
            plugin = FakeDevicePlugin(
                resource, count, env, args.state_dir.absolute(), plugin_dir=args.plugin_dir.absolute()
            )
            try:
                plugins.append(plugin.start())
            except (OSError, grpc.RpcError) as error:
                plugin.stop()  # its server threads would keep the process running
                raise UsageError(
                    f"--plugin-dir {args.plugin_dir}: no kubelet took the registration ({error})"
                ) from None
            print(f"lab: serving {count} {resource} in {args.plugin_dir}", flush=True)
        stop.wait()
    finally:
        for plugin in plugins:
            plugin.stop()
    return 0
