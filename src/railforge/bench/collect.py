"""Collect a benchmark run from the cluster, judge it and write the report (``playbooks/benchmark.yml``).

``collect`` follows the run's MPIJobs (the first names the run: its perftest pods carry that name) and perftest pods
to their end, recording where each pod ran from a watch (mpi-operator deletes the workers once the job is done),
then writes each launcher's and each perftest client's log and ``jobs.json`` into a results directory.
``write_report`` parses and judges that directory and writes ``benchmark-<cluster>-<timestamp>.json``, ``.md`` and
``.png`` (bus bandwidth against message size per run, and each rail's perftest figure) under the reports directory.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict, cast

from railforge.bench.errors import ParseError
from railforge.bench.floors import HardwareClass
from railforge.bench.jobs import RUN_LABEL
from railforge.bench.judge import STATUSES, Results, Verdict, judge, node_table, table
from railforge.bench.nccl import COLLECTIVE
from railforge.bench.resnet import ResnetMeasure, scaling_series
from railforge.bench.results import load_results
from railforge.k8s.informer import Informer, Resource

JOB_NAME = "training.kubeflow.org/job-name"
JOB_ROLE = "training.kubeflow.org/job-role"
ROLE = "railforge.io/benchmark-role"
MPIJOB = ("kubeflow.org", "v2beta1", "mpijobs")
ENDED = ("Succeeded", "Failed")


class MpiJobRecord(TypedDict):
    """An MPIJob of the run as jobs.json records it."""

    name: str
    state: str | None  # None until it ends
    seconds: float | None  # when its state was last read, in seconds since collecting began
    pods: dict[str, str]  # pod -> node
    unfinished: dict[str, str]  # pod -> where it stood, for a job not ended in time


def launcher_log_name(job: str, command: Sequence[str]) -> str:
    """The file a launcher's log is kept in, named after the nccl-tests program its mpirun runs, if any: that
    program's output does not name it, and ``load_results`` reads the collective (which floors apply) from the name."""
    program = next((arg for arg in command if COLLECTIVE.fullmatch(arg)), "launcher")
    return f"{job}-{program}.log"


def _mpijob_state(status: dict) -> str | None:
    for condition in status.get("conditions", []):
        if condition["type"] in ENDED and condition["status"] == "True":
            return condition["type"]
    return None


def pod_state(pod: dict) -> str:
    """Where a pod stands, in one phrase: its phase and node, then why it is no further (a container waiting or
    ended, or the scheduler's reason while unbound)."""
    status = pod.get("status") or {}
    phrase = f"{status.get('phase', 'Pending')} on {pod['spec'].get('nodeName') or 'no node'}"
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        if waiting := state.get("waiting"):
            return (
                f"{phrase}, {container['name']} waiting: {waiting.get('reason')} {waiting.get('message', '')}".strip()
            )
        if ended := state.get("terminated"):
            return f"{phrase}, {container['name']} ended: {ended.get('reason')} (exit {ended.get('exitCode')})"
    for condition in status.get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] != "True":
            return f"{phrase}: {condition.get('reason')} {condition.get('message', '')}".strip()
    return phrase


def _pod_log(core, pod: str, namespace: str) -> str | None:
    """A pod's log; None when the API has none to give (a container that never started)."""
    from kubernetes.client.exceptions import ApiException

    try:
        return core.read_namespaced_pod_log(pod, namespace) or ""
    except ApiException:
        return None


def client_log(outputs: Path, node: str, pod: str) -> Path:
    """Where a perftest client's log is kept: under its node's directory (``load_results`` reads the node there)."""
    return outputs / node / f"{pod}.txt"


def watch_placements(api, namespace: str) -> tuple[Informer, dict[str, tuple[str, str]]]:
    """A started watch of the namespace's MPIJob pods and what it records: pod -> (its job, its node) once bound.
    A poll can miss workers that are bound, run and are deleted between two looks; the watch sees each binding."""
    placed: dict[str, tuple[str, str]] = {}

    def record() -> None:
        for pod in informer.items():
            node = pod["spec"].get("nodeName")
            if node:
                placed[pod["metadata"]["name"]] = (pod["metadata"]["labels"][JOB_NAME], node)

    pods = Resource("Pod", f"/api/v1/namespaces/{namespace}/pods", label_selector=JOB_NAME)
    informer = Informer(api, pods, record)
    return informer.start(), placed


def collect(api, namespace: str, jobs: Sequence[str], timeout: float, results: Path, poll: float = 2.0) -> dict:
    """Follow the run until its MPIJobs and perftest clients end (or ``timeout`` seconds); write what it left."""
    from kubernetes import client
    from kubernetes.client import ApiException

    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    started = time.monotonic()
    seen: dict[str, MpiJobRecord] = {
        job: {"name": job, "state": None, "seconds": None, "pods": {}, "unfinished": {}} for job in jobs
    }
    # perftest pods: client -> (node, phase); server -> node
    clients: dict[str, tuple[str, str | None]] = {}
    servers: dict[str, str] = {}
    watch, placed = watch_placements(api, namespace)
    watch.synced.wait(30)
    while True:
        for job, record in seen.items():
            if record["state"] is None:
                try:  # a custom object comes back as its decoded JSON
                    found = cast(dict, custom.get_namespaced_custom_object(*MPIJOB[:2], namespace, MPIJOB[2], job))
                except ApiException as error:
                    if error.status != 404:
                        raise
                    continue  # not applied yet: collect starts first, so that its watch sees every binding
                record["state"] = _mpijob_state(found.get("status") or {})
                record["seconds"] = round(time.monotonic() - started, 1)
        clients = {
            pod.metadata.name: (pod.spec.node_name or "", pod.status.phase)
            for pod in core.list_namespaced_pod(namespace, label_selector=f"{RUN_LABEL}={jobs[0]},{ROLE}=client").items
            if pod.metadata and pod.metadata.name and pod.spec and pod.status
        }
        servers.update(
            (pod.metadata.name, pod.spec.node_name)
            for pod in core.list_namespaced_pod(namespace, label_selector=f"{RUN_LABEL}={jobs[0]},{ROLE}=server").items
            if pod.metadata and pod.metadata.name and pod.spec and pod.spec.node_name
        )
        ended = all(record["state"] for record in seen.values())
        if ended and all(phase in ENDED for _, phase in clients.values()):
            break
        if time.monotonic() - started > timeout:
            for obj in watch.items():
                job = obj["metadata"]["labels"][JOB_NAME]
                if job in seen and seen[job]["state"] is None:
                    seen[job]["unfinished"][obj["metadata"]["name"]] = pod_state(obj)
            for record in seen.values():
                record["state"] = record["state"] or f"not ended after {timeout:g} s"
            break
        time.sleep(poll)
    watch.stop()
    for pod, (job, node) in sorted(placed.copy().items()):
        if job in seen:
            seen[job]["pods"][pod] = node
    launchers: dict[str, tuple[str, list[str]]] = {}  # job -> (launcher pod, its command)
    for obj in watch.items():  # launchers stay once done (only the workers are deleted)
        labels = obj["metadata"]["labels"]
        if labels.get(JOB_ROLE) == "launcher" and labels[JOB_NAME] in seen:
            container = obj["spec"]["containers"][0]
            command = [*container.get("command", ()), *container.get("args", ())]
            launchers[labels[JOB_NAME]] = (obj["metadata"]["name"], command)
    outputs = results / "outputs"
    shutil.rmtree(outputs, ignore_errors=True)  # the last run's logs are not this run's results
    outputs.mkdir(parents=True)
    for job, (launcher, command) in launchers.items():
        if (log := _pod_log(core, launcher, namespace)) is not None:
            (outputs / launcher_log_name(job, command)).write_text(log)
    for pod, (node, _phase) in clients.items():
        if (log := _pod_log(core, pod, namespace)) is not None:
            (outputs / node).mkdir(exist_ok=True)
            client_log(outputs, node, pod).write_text(log)
    collected = {
        "mpijobs": list(seen.values()),
        "perftest": {
            pod: {"node": node, "phase": phase, "server": servers.get(pod.removesuffix("-client") + "-server", "")}
            for pod, (node, phase) in clients.items()
        },
    }
    (results / "jobs.json").write_text(json.dumps(collected, indent=2) + "\n")
    return collected


@dataclass(frozen=True)
class Report:
    json_path: Path
    markdown_path: Path
    plot_path: Path
    verdicts: tuple[Verdict, ...]

    @property
    def failures(self) -> list[str]:
        return [v.message for v in self.verdicts if v.status == "fail"]


def read_jobs(results_dir: Path) -> dict:
    """The jobs.json ``collect`` wrote into ``results_dir`` ({} where there is none); ParseError where it is not
    what ``collect`` writes."""
    path = results_dir / "jobs.json"
    if not path.exists():
        return {}
    expected = "jobs.json as `collect` writes it"
    try:
        jobs = json.loads(path.read_text())
    except (OSError, ValueError) as error:  # unreadable, not UTF-8, not JSON
        raise ParseError(str(path), None, expected, str(error)) from None
    if not _collected(jobs):
        raise ParseError(str(path), None, f"{expected}: mpijobs a list of jobs, perftest a mapping of pods")
    return jobs


def _collected(jobs: object) -> bool:
    """Whether ``jobs`` has the shape ``collect`` writes (the fields the report reads)."""

    def names(value: object) -> bool:  # pod -> node, or pod -> where it stood
        return isinstance(value, dict) and all(isinstance(name, str) for name in value.values())

    if not isinstance(jobs, dict):
        return False
    mpijobs, perftest = jobs.get("mpijobs") or [], jobs.get("perftest") or {}
    return (
        isinstance(mpijobs, list)
        and all(
            isinstance(job, dict)
            and isinstance(job.get("name"), str)
            and isinstance(job.get("state", ...), str | None)  # None: not ended
            and names(job.get("pods", {}))
            and names(job.get("unfinished") or {})
            for job in mpijobs
        )
        and isinstance(perftest, dict)
        and all(
            isinstance(seen, dict) and all(isinstance(seen.get(key), str) for key in ("node", "phase"))
            for seen in perftest.values()
        )
    )


def _job_verdicts(jobs: dict) -> list[Verdict]:
    verdicts = []
    for mpijob in jobs.get("mpijobs") or []:
        if mpijob.get("state") != "Succeeded":
            subject = f"MPIJob {mpijob.get('name')}"
            nodes = tuple(sorted(set(mpijob.get("pods", {}).values())))
            stood = "".join(f"; {pod} {state}" for pod, state in sorted((mpijob.get("unfinished") or {}).items()))
            verdicts.append(Verdict(subject, "job", "fail", f"{subject}: {mpijob.get('state')}{stood}", nodes=nodes))
    for pod, seen in (jobs.get("perftest") or {}).items():
        if seen["phase"] != "Succeeded":
            subject = f"node {seen['node']} perftest {pod}"
            verdicts.append(Verdict(subject, "job", "fail", f"{subject}: {seen['phase']}", nodes=(seen["node"],)))
    return verdicts


def node_summary(verdicts: Sequence[Verdict]) -> dict[str, dict]:
    """Per node: its rails, its bandwidth figures, its worst verdict and what failed (validate.yml's join)."""
    nodes: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        for node in verdict.nodes:
            nodes.setdefault(node, []).append(verdict)
    summary = {}
    for node, own in sorted(nodes.items()):
        figures = [
            f"{v.rail or v.subject.removeprefix(f'node {node} ')}: {v.measured:g} {v.unit}"
            for v in own
            if v.measured is not None and v.unit in ("GB/s", "Gb/s")
        ]
        summary[node] = {
            "rails": sorted({v.rail for v in own if v.rail}),
            "bandwidth": list(dict.fromkeys(figures)),
            "verdict": min((v.status for v in own), key=STATUSES.index),
            "failed": [v.message for v in own if v.status == "fail"],
        }
    return summary


def scaling_points(results: Results) -> dict[str, list[ResnetMeasure]]:
    """The finished ResNet-50 runs' results per series (railforge.bench.resnet.scaling_series)."""
    return {name: [result for _, result in runs] for name, runs in scaling_series(results.resnet).items()}


def scaling_table(results: Results) -> list[str]:
    """Markdown lines: each finished ResNet-50 run's images/s, per process and against linear from the smallest."""
    lines = []
    for series, points in scaling_points(results).items():
        base = points[0].per_process
        lines += [
            "",
            f"| {series} | nodes | images/s | per process | of linear |",
            "| ---: | ---: | ---: | ---: | ---: |",
        ]
        for point in points:
            lines.append(
                f"| {point.process_count} | {point.nodes} | {point.images_per_sec:g} | {point.per_process:.4g} "
                f"| {point.per_process / base:.2f} |"
            )
    return ["## ResNet-50 scaling", *lines, ""] if lines else []


# a verdict's colour on the plot
COLOURS = {"pass": "tab:green", "fail": "tab:red", "warn": "tab:orange", "info": "tab:grey"}
ALLREDUCE_FLOORS = ("nccl_all_reduce_1node", "nccl_all_reduce_multinode", "mpi_allreduce")


def _judged(verdicts: Sequence[Verdict], log: str, checks: Sequence[str]) -> Verdict | None:
    """The verdict on a log's figure against a floor, if the class has one."""
    return next((v for v in verdicts if v.log == log and v.check in checks and v.limit is not None), None)


def _plot(results: Results, verdicts: Sequence[Verdict], hw: HardwareClass, path: Path, title: str) -> None:
    """One panel per kind of result; each floor drawn as a dashed line, each judged figure marked in its verdict's
    colour (green pass, red fail)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    perftest = [(node, run) for node, run in results.perftest if run.bandwidth]
    scaling = scaling_points(results)
    panels = 1 + bool(perftest) + bool(scaling)
    figure, axes = plt.subplots(1, panels, figsize=(2 + 5 * panels, 4.5), squeeze=False)
    panel = iter(axes[0])
    bandwidth = next(panel)
    judged_points = []  # (verdict, the message size it was judged at)
    for run in results.nccl:
        sizes = [row.size_bytes for row in run.rows]
        bandwidth.plot(sizes, [row.out_of_place.busbw_gbps for row in run.rows], marker=".", label=run.label)
        if (verdict := _judged(verdicts, run.source, ALLREDUCE_FLOORS)) is not None:
            judged_points.append((verdict, hw.floors[verdict.check].message_bytes or sizes[-1]))
    for mpi_run in results.mpi:  # one message size: a point in its verdict's colour, grey when not judged
        verdict = _judged(verdicts, mpi_run.source, ALLREDUCE_FLOORS)
        colour = COLOURS[verdict.status if verdict is not None else "info"]
        size = mpi_run.size_bytes
        bandwidth.plot([size], [mpi_run.busbw_gbps], marker="o", linestyle="", color=colour, label=mpi_run.label)
        if verdict is not None:
            judged_points.append((verdict, size))
    for verdict, size in judged_points:
        colour = COLOURS[verdict.status]
        bandwidth.axhline(verdict.limit, color=colour, linestyle="--", linewidth=1, label=f"{verdict.check} floor")
        bandwidth.plot([size], [verdict.measured], marker="o", markersize=10, color=colour, fillstyle="none")
        # the figure in words beside its mark: a point far below its floor sits on the axis, hard to see
        bandwidth.annotate(
            f"{verdict.measured:.3g} GB/s", (size, verdict.measured), xytext=(8, 8), textcoords="offset points",
            color=colour, fontsize="small", fontweight="bold",
        )  # fmt: skip
    bandwidth.set_xscale("log", base=2)
    bandwidth.set_ylim(bottom=0)
    bandwidth.set_xlabel("message size (bytes)")
    bandwidth.set_ylabel("bus bandwidth (GB/s)")
    bandwidth.set_title("all_reduce")
    bandwidth.grid(True, alpha=0.3)
    if results.nccl or results.mpi:
        bandwidth.legend(fontsize="small")
    if perftest:
        rails = next(panel)
        labels = [f"{node}\n{run.device}" for node, run in perftest]
        judged = [_judged(verdicts, run.source, (run.tool,)) for _, run in perftest]
        colours = [COLOURS[v.status] if v is not None else COLOURS["info"] for v in judged]
        rails.bar(labels, [run.bandwidth[-1].average_gbps for _, run in perftest], color=colours)
        floors = [(index, v.limit) for index, v in enumerate(judged) if v is not None]
        for index, limit in floors:
            label = "floor" if index == floors[0][0] else None
            rails.hlines(limit, index - 0.4, index + 0.4, colors="black", linestyles="--", linewidth=1, label=label)
        if floors:
            rails.legend(fontsize="small")
        rails.set_ylabel("BW average (Gb/s)")
        rails.set_title("perftest per node and rail")
        rails.tick_params(axis="x", labelsize="small")
    if scaling:
        images = next(panel)
        for series, points in scaling.items():
            counts = [point.process_count for point in points]
            images.plot(counts, [point.images_per_sec for point in points], marker="o", label=f"measured ({series})")
            base = points[0]
            if len(points) > 1:  # from one size there is nothing to scale to
                linear = [base.per_process * count for count in counts]
                images.plot(counts, linear, linestyle="--", color="grey", label=f"linear from {base.processes}")
            if (per_gpu := hw.floors.get("resnet50_per_gpu")) is not None and not base.on_cpu:
                minimum = [per_gpu.value * count for count in counts]
                images.plot(
                    counts, minimum, linestyle="--", marker="_", markersize=16, color=COLOURS["fail"],
                    label="resnet50_per_gpu floor",
                )  # fmt: skip
        most = max(point.process_count for points in scaling.values() for point in points)
        images.set_xlim(0, most + 1)  # from none: one size alone still reads as a share of the axis
        images.set_ylim(bottom=0)
        images.xaxis.set_major_locator(MaxNLocator(integer=True))  # processes come whole
        images.set_xlabel("GPUs (CPU ranks on the CPU fallback)")
        images.set_ylabel("images/s")
        images.set_title("ResNet-50 scaling")
        images.grid(True, alpha=0.3)
        images.legend(fontsize="small")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write_report(
    results_dir: Path, cluster: str, hw: HardwareClass, reports: Path, now: datetime | None = None
) -> Report:
    """Parse and judge ``results_dir`` (``collect``'s), write the JSON, Markdown and PNG; return the Report."""
    now = now or datetime.now(UTC)
    jobs = read_jobs(results_dir)
    pods = {pod: node for mpijob in jobs.get("mpijobs") or [] for pod, node in mpijob.get("pods", {}).items()}
    perftest = jobs.get("perftest") or {}
    outputs = results_dir / "outputs"
    verdicts = _job_verdicts(jobs)
    try:
        results, skipped = load_results(outputs, pods) if outputs.is_dir() else (Results(), [])
    except ParseError as error:
        results, skipped = Results(), []
        verdicts.append(Verdict("benchmark output", "complete", "fail", f"benchmark output: {error}"))
    servers = {str(client_log(outputs, seen["node"], pod)): seen.get("server", "") for pod, seen in perftest.items()}
    verdicts += judge(results, hw, servers)
    judged = results.nccl or results.mpi or results.perftest or results.resnet
    if not judged and not any(v.status == "fail" for v in verdicts):
        verdicts.append(Verdict("benchmark output", "complete", "fail", "benchmark output: no result to judge"))
    stem = f"benchmark-{cluster}-{now.strftime('%Y%m%dT%H%M%SZ')}"
    reports.mkdir(parents=True, exist_ok=True)
    json_path, markdown_path, plot_path = (reports / f"{stem}.{suffix}" for suffix in ("json", "md", "png"))
    _plot(results, verdicts, hw, plot_path, f"{cluster}, {now:%Y-%m-%d %H:%M} UTC, class {hw.name}")
    failed = [v.message for v in verdicts if v.status == "fail"]
    document = {
        "cluster": cluster,
        "created": now.isoformat(timespec="seconds"),
        "hardware_class": asdict(hw),
        "jobs": jobs,
        "results": asdict(results),
        "verdicts": [asdict(v) for v in verdicts],
        "nodes": node_summary(verdicts),
        "failed": failed,
        "skipped": [str(path) for path in skipped],
        "plot": plot_path.name,
    }
    json_path.write_text(json.dumps(document, indent=2) + "\n")
    lines = [
        f"# Benchmark of {cluster}, {now:%Y-%m-%d %H:%M:%S} UTC",
        "",
        f"Hardware class `{hw.name}`: {hw.gpu} / {hw.nic} / {hw.link}.",
        "",
        f"**{'FAILED' if failed else 'PASSED'}**: {len(failed)} failed of {len(verdicts)} verdicts.",
        *[f"- {message}" for message in failed],
        "",
        "## Jobs",
        "",
        "| job | state | pods (node) |",
        "| --- | --- | --- |",
    ]
    for mpijob in jobs.get("mpijobs") or []:
        placed = ", ".join(f"{pod} ({node})" for pod, node in sorted(mpijob.get("pods", {}).items())) or "-"
        lines.append(f"| MPIJob {mpijob['name']} | {mpijob['state']} | {placed} |")
    for pod, seen in sorted(perftest.items()):
        server = seen.get("server") or "?"
        lines.append(f"| perftest {pod} | {seen['phase']} | {pod} ({seen['node']}), its server ({server}) |")
    lines += ["", "## Per node", "", node_table(verdicts), "", "## Verdicts", "", table(verdicts), ""]
    lines += scaling_table(results)
    lines += [f"![bus bandwidth, rails and scaling]({plot_path.name})", ""]
    markdown_path.write_text("\n".join(lines))
    return Report(json_path, markdown_path, plot_path, tuple(verdicts))
