"""The arena: one workload of gangs against a scheduler on a real API server with KWOK's fake nodes, and the metrics
of what happened, computed from the pods' own transitions as a watch saw them.

A job is a gang of pods, each asking ``gpus`` GPUs and running ``runtime`` seconds once Running (KWOK ends it,
``railforge.testbed.kwok``). A contender names the scheduler the pods ask for and how a job says it is a gang: a
``scheduling.x-k8s.io`` PodGroup its pods join by label (railforge, coscheduling), a ``scheduling.k8s.io`` PodGroup
its pods name in ``spec.schedulingGroup`` (Kubernetes' own gangs, alpha in 1.36), a batch/v1 Job submitted suspended
to a Kueue LocalQueue (Kueue admits the whole Job, the Job controller makes its pods), or not at all (lone pods: what
kube-scheduler's defaults see).
"""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, cast

from railforge.k8s.gangapis import GangApi
from railforge.k8s.settings import Settings
from railforge.scheduler import GPU, Gang, Member, Queue
from railforge.testbed.kueue import QUEUE_LABEL
from railforge.testbed.kwok import FAKE_NODE_LABEL, RUNTIME_ANNOTATION

BIG_JOB_GPUS = 16  # "16+ GPU jobs"
ARENA_JOB = "railforge.io/arena-job"  # on every pod of the arena: the job it belongs to
# A gang's pods are bound one call at a time: binds spread over less than this are one scheduling decision, not a
# gang left partly bound.
PARTIAL_TOLERANCE = 1.0


@dataclass(frozen=True)
class Job:
    name: str
    pods: int
    gpus: int  # per pod
    runtime: float  # seconds each pod runs once Running
    submit: float = 0.0  # seconds after the workload starts


@dataclass(frozen=True)
class Contender:
    name: str
    scheduler_name: str
    gang: GangApi | None  # the PodGroup API its jobs are gangs of; None: lone pods
    queue: str | None = None  # a Kueue LocalQueue: each job is a suspended Job submitted there, not pods

    @property
    def slug(self) -> str:
        """Its name as a namespace's name takes it: lower case, a dash for anything else than a letter or digit."""
        return re.sub("[^a-z0-9]+", "-", self.name.lower())


@dataclass
class PodTimes:
    """When (seconds since the workload started) the watch saw each transition of one pod; None: never."""

    job: str
    bound: float | None = None
    running: float | None = None
    ended: float | None = None
    phase: str = "Pending"


@dataclass
class Observation:
    started: float  # time.monotonic() when the workload began
    pods: dict[str, PodTimes] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def seen(self, name: str, job: str, node: str | None, phase: str) -> None:
        now = time.monotonic() - self.started
        with self.lock:
            times = self.pods.setdefault(name, PodTimes(job))
            if node and times.bound is None:
                times.bound = now
            if phase in ("Running", "Succeeded", "Failed") and times.running is None:
                times.running = now
            if phase in ("Succeeded", "Failed") and times.ended is None:
                times.ended = now
            times.phase = phase


def pod_body(job: Job, index: int, contender: Contender, image: str) -> dict:
    joins, fields = contender.gang.joining(job.name) if contender.gang is not None else ({}, {})
    labels = {ARENA_JOB: job.name, **joins}
    return {
        "metadata": {
            "name": f"{job.name}-{index}",
            "labels": labels,
            "annotations": {RUNTIME_ANNOTATION: f"{job.runtime:g}s"},
        },
        "spec": {
            "schedulerName": contender.scheduler_name,
            **fields,
            "nodeSelector": {FAKE_NODE_LABEL: "fake"},
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "resources": {"requests": {GPU: str(job.gpus)}, "limits": {GPU: str(job.gpus)}},
                }
            ],
        },
    }


def job_body(job: Job, contender: Contender, image: str) -> dict:
    """The job as a suspended batch/v1 Job of ``job.pods`` pods in the contender's Kueue LocalQueue."""
    template = pod_body(job, 0, contender, image)
    del template["metadata"]["name"]  # the Job controller names its pods
    spec = {"parallelism": job.pods, "completions": job.pods, "suspend": True, "template": template}
    return {"metadata": {"name": job.name, "labels": {QUEUE_LABEL: contender.queue}}, "spec": spec}


def run(api, namespace: str, jobs: list[Job], contender: Contender, image: str, timeout: float) -> Observation:
    """Submit every job at its time and watch the namespace's pods until each has ended or ``timeout`` seconds."""
    from kubernetes import client, watch
    from urllib3.exceptions import ProtocolError

    core, custom, batch = client.CoreV1Api(api), client.CustomObjectsApi(api), client.BatchV1Api(api)
    observation = Observation(time.monotonic())
    stop = threading.Event()
    watcher = watch.Watch()

    def follow() -> None:
        while not stop.is_set():
            try:
                for event in watcher.stream(core.list_namespaced_pod, namespace, timeout_seconds=5):
                    pod = event["object"]
                    job = (pod.metadata.labels or {}).get(ARENA_JOB, "")
                    observation.seen(pod.metadata.name, job, pod.spec.node_name, pod.status.phase or "Pending")
                    if stop.is_set():
                        return
            except ProtocolError:  # the server ended the stream early: list and watch again
                continue

    thread = threading.Thread(target=follow, name="arena-watch", daemon=True)
    thread.start()
    try:
        for job in sorted(jobs, key=lambda job: job.submit):
            time.sleep(max(0.0, job.submit - (time.monotonic() - observation.started)))
            if contender.queue is not None:
                batch.create_namespaced_job(namespace, cast(Any, job_body(job, contender, image)))
                continue
            if contender.gang is not None:
                body = contender.gang.podgroup(job.name, job.pods)
                custom.create_namespaced_custom_object(
                    contender.gang.group, contender.gang.version, namespace, "podgroups", body
                )
            for index in range(job.pods):
                # the client sends a mapping as it is: the API server checks it
                core.create_namespaced_pod(namespace, cast(Any, pod_body(job, index, contender, image)))
        deadline = observation.started + timeout
        total = sum(job.pods for job in jobs)
        while time.monotonic() < deadline:
            with observation.lock:
                ended = sum(1 for times in observation.pods.values() if times.ended is not None)
            if ended == total:
                break
            time.sleep(0.2)
    finally:
        stop.set()
        watcher.stop()
        thread.join(10)
    return observation


def simulated(jobs: list[Job], nodes: list[dict], settings: Settings) -> Observation:
    """The same jobs through railforge's simulator (its core without an API server, the same settings) on the same
    Node objects: an observation whose pods are bound, running and ended when the simulator started and ended their
    gangs, for ``summary`` to measure as it does a contender's."""
    from railforge.k8s.translate import to_node
    from railforge.sim.engine import SimJob, Simulator

    queue = settings.default_queue
    gangs = [
        SimJob(
            Gang(
                job.name,
                queue,
                tuple(Member(f"{job.name}-{i}", {GPU: job.gpus}) for i in range(job.pods)),
                submit_time=job.submit,
                node_selector={FAKE_NODE_LABEL: "fake"},
            ),
            job.runtime,
        )
        for job in jobs
    ]
    cluster = [to_node(node, settings.topology, {}) for node in nodes]
    result = Simulator(cluster, [Queue(queue)], gangs, settings.policy).run()
    observation = Observation(started=0.0)
    pods = {job.name: job.pods for job in jobs}
    for outcome in result.jobs:
        phase = "Pending" if outcome.end is None else "Succeeded"
        for index in range(pods[outcome.job_id]):
            times = PodTimes(outcome.job_id, outcome.first_start, outcome.first_start, outcome.end, phase)
            observation.pods[f"{outcome.job_id}-{index}"] = times
    return observation


@dataclass(frozen=True)
class JobResult:
    name: str
    gpus: int  # the whole job's
    wait: float | None  # submit -> the last pod bound (the gang whole); None: never whole
    completion: float | None  # submit -> the last pod ended; None: not ended
    partial: float  # seconds during which some but not all of its pods were bound


def job_results(jobs: list[Job], observation: Observation, horizon: float) -> list[JobResult]:
    """Per job, from its pods' transitions; ``horizon`` closes what was still partly bound when watching stopped."""
    by_job: dict[str, list[PodTimes]] = {}
    for times in observation.pods.values():
        by_job.setdefault(times.job, []).append(times)
    results = []
    for job in jobs:
        pods = by_job.get(job.name, [])
        bound = sorted(times.bound for times in pods if times.bound is not None)
        whole = bound[-1] if len(bound) == job.pods else None
        ends = [times.ended for times in pods if times.ended is not None]
        completion = max(ends) - job.submit if len(ends) == job.pods else None
        # partly bound from the first bind until every pod is bound, or one ends (the gang is no longer whole)
        first_end = min(ends, default=horizon)
        partial = 0.0
        if bound:
            partial = max(0.0, min(whole if whole is not None else horizon, first_end) - bound[0])
        results.append(
            JobResult(
                job.name,
                job.pods * job.gpus,
                whole - job.submit if whole is not None else None,
                completion,
                partial,
            )
        )
    return results


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]


def summary(jobs: list[Job], observation: Observation, capacity_gpus: int) -> dict[str, float]:
    """The contender's metrics: mean and p99 completion, p99 wait of 16+ GPU jobs, makespan, GPU utilisation over
    the makespan, gangs partly bound for longer than PARTIAL_TOLERANCE and for how long, jobs never started."""
    ends = [times.ended for times in observation.pods.values() if times.ended is not None]
    makespan = max(ends, default=math.nan)
    results = job_results(jobs, observation, makespan if ends else time.monotonic() - observation.started)
    completions = [result.completion for result in results if result.completion is not None]
    big_waits = [r.wait for r in results if r.gpus >= BIG_JOB_GPUS and r.wait is not None]
    by_name = {job.name: job for job in jobs}
    gpu_seconds = sum(
        by_name[times.job].gpus * (times.ended - times.running)
        for times in observation.pods.values()
        if times.running is not None and times.ended is not None and times.job in by_name
    )
    return {
        "jobs": len(jobs),
        "completed": len(completions),
        "never_started": sum(1 for result in results if result.wait is None),
        "mean_completion_s": sum(completions) / len(completions) if completions else math.nan,
        "p99_completion_s": percentile(completions, 0.99),
        "p99_wait_big_s": percentile(big_waits, 0.99),
        "makespan_s": makespan,
        "gpu_utilisation": gpu_seconds / (capacity_gpus * makespan) if ends and makespan > 0 else math.nan,
        "gangs_partly_bound": sum(1 for result in results if result.partial > PARTIAL_TOLERANCE),
        "partly_bound_s": sum(result.partial for result in results if result.partial > PARTIAL_TOLERANCE),
    }
