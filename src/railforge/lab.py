"""``railforge lab job``: the lab's last step. An MPIJob of the OpenMPI image (deploy/openmpi) is submitted to the
cluster, gang-scheduled by railforge through the MPI operator, followed to its end, and its launcher's log read
back: one line per MPI rank, a summary, and a table of which node ran what."""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy/openmpi/mpijob.yml.j2"
VERSIONS_FILE = ROOT / "roles/versions/defaults/main.yml"
# The lines allreduce (deploy/openmpi/allreduce.c) prints: one per rank, then rank 0's summary.
RANK_LINE = re.compile(r"^rank=(\d+) host=(\S+) bytes=(\d+) result=(ok|FAIL) time_s=([0-9.]+)$", re.M)
SUMMARY_LINE = re.compile(
    r"^summary ranks=(\d+) bytes=(\d+) iterations=(\d+) time_s=([0-9.]+) algbw_GBps=([0-9.]+) "
    r"busbw_GBps=([0-9.]+) result=(ok|FAIL)$",
    re.M,
)
JOB_ROLE = "training.kubeflow.org/job-role"
JOB_NAME = "training.kubeflow.org/job-name"


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


def render_job(name: str, namespace: str, workers: int, worker_cpu: str, image: str | None = None) -> dict:
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
    )
    return yaml.safe_load(text)


@dataclass(frozen=True)
class JobPod:
    name: str
    role: str
    node: str
    scheduler: str


def node_table(pods: list[JobPod], ranks: list[Rank]) -> list[tuple[str, str, str, str]]:
    """(node, pods with their roles, ranks, verdict) per node that ran a pod of the job."""
    by_node: dict[str, list[JobPod]] = {}
    for pod in pods:
        by_node.setdefault(pod.node or "(unbound)", []).append(pod)
    rows = []
    for node, members in sorted(by_node.items()):
        mine = [rank for rank in ranks if rank.pod in {pod.name for pod in members}]
        roles = ", ".join(f"{pod.name} ({pod.role})" for pod in sorted(members, key=lambda pod: pod.name))
        verdict = "ok" if mine and all(rank.ok for rank in mine) else ("FAIL" if mine else "-")
        rows.append((node, roles, " ".join(str(rank.rank) for rank in mine) or "-", verdict))
    return rows


def run_job(kubeconfig: str, namespace: str, name: str, workers: int, worker_cpu: str, timeout: float) -> int:
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    config.load_kube_config(kubeconfig)
    core, custom = client.CoreV1Api(), client.CustomObjectsApi()
    try:
        core.create_namespace({"metadata": {"name": namespace}})
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
    submitted = time.monotonic()
    job = render_job(name, namespace, workers, worker_cpu)
    custom.create_namespaced_custom_object(group, version, namespace, plural, job)
    print(f"lab: MPIJob {namespace}/{name} submitted: {workers} workers, gang-scheduled by railforge", flush=True)
    state, seen = None, {}  # the job's pods as they were bound: the operator deletes the workers at the end
    while time.monotonic() - submitted < timeout:
        for pod in core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME}={name}").items:
            if pod.spec.node_name:
                role = pod.metadata.labels.get(JOB_ROLE, "?")
                seen[pod.metadata.name] = JobPod(pod.metadata.name, role, pod.spec.node_name, pod.spec.scheduler_name)
        status = custom.get_namespaced_custom_object(group, version, namespace, plural, name).get("status", {})
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
    rows = [("node", "pods (role)", "ranks", "result"), *node_table(pods, ranks)]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    worker_nodes = {pod.node for pod in pods if pod.role == "worker"}
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
    )
    if not good:
        print(
            f"lab: the job did not prove the chain: state {state}, {len(ranks)} of {workers} ranks, workers on "
            f"{len(worker_nodes)} nodes, schedulers {sorted(schedulers)}, summary {summary}",
            file=sys.stderr,
        )
    return 0 if good else 1


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("lab", help="the lab cluster of `make lab`")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    job = actions.add_parser("job", help="run the allreduce MPIJob across the lab's workers and print where it ran")
    job.add_argument("--kubeconfig", required=True)
    job.add_argument("--namespace", default="railforge-lab")
    job.add_argument("--name", default="allreduce")
    job.add_argument("--workers", type=int, default=2)
    # More than half of a lab node's 2 CPUs: one worker per node, whatever the scheduler's packing preference.
    job.add_argument("--worker-cpu", default="1200m")
    job.add_argument("--timeout", type=float, default=300)
    job.set_defaults(
        func=lambda args: run_job(
            args.kubeconfig, args.namespace, args.name, args.workers, args.worker_cpu, args.timeout
        )
    )
