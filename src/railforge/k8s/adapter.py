"""The gang scheduler on Kubernetes: informers in, ``decide()`` in the middle, bindings and evictions out.

One pass (``cycle``): read the informers' caches (with what this process wrote that the watches have not shown
yet), translate them (``translate``), settle gangs an interrupted run left partly bound, call the core, hand its
decisions to the write side (``writes``), tell users why and publish the dashboard's state (``reporting``). Passes
run on changes, at most once per ``min_period_seconds``, and at least every ``resync_seconds`` while gangs wait.
Only the leader acts, and each of its writes is fenced by its leadership; a standby replica keeps its caches warm.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import railforge.scheduler as core
from railforge.k8s import dra, reporting
from railforge.k8s.collector import PassCollector
from railforge.k8s.events import Reporter
from railforge.k8s.gangapis import served
from railforge.k8s.informer import Informer, Resource
from railforge.k8s.leader import LeaderElector
from railforge.k8s.metrics import SchedulerMetrics
from railforge.k8s.reporting import state_view
from railforge.k8s.settings import Settings
from railforge.k8s.translate import Translation, TranslationCache, translate
from railforge.k8s.views import SchedulerState
from railforge.k8s.writes import WriteSide
from railforge.scheduler import host
from railforge.scheduler.expected import expected_starts

log = logging.getLogger(__name__)

EXPECTED_EVERY_SECONDS = 5.0  # expected starts are planned at most this often (a what-if costs a decide())

QUEUES = "/apis/railforge.io/v1alpha1/queues"


def _trim_pod(pod: dict) -> dict:
    """Its phase; for a failed pod also how its containers ended and its conditions (what a Job's
    podFailurePolicy reads: translate.failure_action)."""
    pod["metadata"].pop("managedFields", None)
    status = pod.get("status") or {}
    kept: dict = {"phase": status.get("phase")}
    if kept["phase"] == "Failed":
        for key in ("initContainerStatuses", "containerStatuses"):
            kept[key] = [
                {"name": container.get("name"), "state": {"terminated": ended}}
                for container in status.get(key) or []
                if (ended := (container.get("state") or {}).get("terminated")) is not None
            ]
        kept["conditions"] = [{key: c.get(key) for key in ("type", "status")} for c in status.get("conditions") or []]
    if status.get("resourceClaimStatuses"):  # the ResourceClaims made from its templates
        kept["resourceClaimStatuses"] = status["resourceClaimStatuses"]
    pod["status"] = kept
    return pod


def _trim_meta(obj: dict) -> dict:
    obj["metadata"].pop("managedFields", None)
    return obj


def _trim_job(job: dict) -> dict:
    """What limits a gang's restarts (GangObjects.owner_limit): its uid, its backoff limits and pod failure
    policy, and the failures it counted."""
    meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
    limits = ("backoffLimit", "backoffLimitPerIndex", "podFailurePolicy")
    kept = ("uid", "name", "namespace", "resourceVersion")
    return {
        "metadata": {key: meta.get(key) for key in kept},
        "spec": {key: spec[key] for key in limits if key in spec},
        "status": {
            "failed": status.get("failed", 0),
            "uncountedTerminatedPods": {"failed": (status.get("uncountedTerminatedPods") or {}).get("failed") or []},
        },
    }


class Adapter:
    def __init__(self, api, settings: Settings, identity: str | None = None):
        self.api = api
        # one pooled connection per binding worker, plus six watches, the reporter and the election
        api.rest_client.pool_manager.connection_pool_kw["maxsize"] = settings.bind_workers + 10
        api.rest_client.pool_manager.clear()
        self.settings = settings
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}"
        scheduler_class = getattr(core, "Scheduler", None)  # the core's incremental form, when it has one
        self.decide = scheduler_class().decide if scheduler_class is not None else core.decide
        self.state = SchedulerState()
        self.metrics = SchedulerMetrics(self.state)
        self.collector = PassCollector()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        name = settings.scheduler_name
        self.gang_apis = served(api)
        self.informers = {
            # every node: one outside node_selector still exists, so gangs bound there are not "lost"
            "nodes": Resource("Node", "/api/v1/nodes", trim=_trim_meta),
            "pods": Resource("Pod", "/api/v1/pods", field_selector=f"spec.schedulerName={name}", trim=_trim_pod),
            "foreign": Resource(
                "Pod",
                "/api/v1/pods",
                field_selector=f"spec.schedulerName!={name},spec.nodeName!=,status.phase!=Succeeded,"
                "status.phase!=Failed",
                trim=_trim_pod,
            ),
            **{api.kind: Resource(api.kind, api.collection, trim=_trim_meta) for api in self.gang_apis},
            "queues": Resource("Queue", QUEUES, trim=_trim_meta),
            "namespaces": Resource("Namespace", "/api/v1/namespaces", trim=_trim_meta),
            # a Job's change is read on the next pass, it starts none: its status changes with every pod it has
            "jobs": Resource("Job", "/apis/batch/v1/jobs", trim=_trim_job, wakes=False),
        }
        if dra.served(api):  # DRA: the devices drivers publish, their classes, and the claims pods use
            for kind, plural in (("ResourceClaim", "resourceclaims"), ("ResourceSlice", "resourceslices")):
                self.informers[kind] = Resource(kind, f"{dra.API}/{plural}", trim=_trim_meta)
            self.informers["DeviceClass"] = Resource("DeviceClass", f"{dra.API}/deviceclasses", trim=_trim_meta)
        self.caches = {
            key: Informer(api, resource, self.wake.set if resource.wakes else lambda: None)
            for key, resource in self.informers.items()
        }
        self.pool = ThreadPoolExecutor(settings.bind_workers, thread_name_prefix="bind")
        self.reporter = Reporter(api, name, settings.event_interval_seconds)
        election = settings.leader_election
        self.elector = (
            LeaderElector(api, election, settings.lease_name, self.identity, on_change=self.wake.set)
            if election.enabled
            else None
        )
        self.writes = WriteSide(
            api,
            self.pool,
            self.leading,
            settings.eviction_grace_seconds,
            settings.avoid_failed_nodes_seconds,
            self.state,
            self.metrics,
            self.reporter,
            self.wake.set,
        )
        self.cel_programs: dict[str, dra.Program] = {}  # DRA selectors, compiled once, with their verdicts
        self.translated = TranslationCache()  # the Nodes and Gangs of the last pass, reused while unchanged
        self.reservations: tuple[core.Reservation, ...] = ()
        self.expected: dict[str, float] = {}  # waiting gang -> expected start, as last planned
        self.expected_at = -math.inf
        self.usage: dict[str, float] = {}
        self.usage_at: float | None = None
        self.thread: threading.Thread | None = None

    # -- life cycle ----------------------------------------------------------------------------------------------
    def start(self) -> Adapter:
        """Start the informers, the election and the loop in background threads."""
        for informer in self.caches.values():
            informer.start()
        self.reporter.start()
        if self.elector is not None:
            self.elector.start()
        self.thread = threading.Thread(target=self.run, name="scheduler-loop", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()
        if self.thread is not None:
            self.thread.join(timeout=30)
        if self.elector is not None:
            self.elector.stop()
        for informer in self.caches.values():
            informer.stop()
        self.pool.shutdown(wait=True)
        self.reporter.stop()
        self.collector.stop()

    def leading(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.caches.values())

    def run(self) -> None:
        """The loop: a pass on every change (at most one per min period), and every resync period."""
        if "ResourceClaim" in self.caches:
            dra.cel_environment()  # built while the informers sync, not in the first pass that meets a claim
        last = 0.0
        while not self.stopping.is_set():
            self.wake.wait(self.settings.resync_seconds)
            self.wake.clear()
            pause = last + self.settings.min_period_seconds - time.monotonic()
            if pause > 0:
                self.stopping.wait(pause)
            if self.stopping.is_set():
                return
            leader, synced = self.leading(), self.synced()
            self.state.set_leader(leader, synced, self.elector.holder if self.elector is not None else self.identity)
            if not (leader and synced):
                continue  # the elector and the informers wake the loop when that changes
            last = time.monotonic()
            try:
                self.cycle()
            except Exception:  # a pass that fails is logged and retried; the loop never stops on bad input
                log.exception("scheduling pass failed")
                self.state.count("pass_errors")
                self.stopping.wait(1.0)
                self.wake.set()
            else:
                self.metrics.passed(time.monotonic() - last)
                self.collector.after_pass()

    # -- one pass ------------------------------------------------------------------------------------------------
    def translate(self, now: float) -> Translation:
        groups = {
            (api, g["metadata"]["namespace"], g["metadata"]["name"]): self.writes.overlay_owner(g)
            for api in self.gang_apis
            for g in self.caches[api.kind].items()
        }
        namespaces = {n["metadata"]["name"]: n for n in self.caches["namespaces"].items()}
        return translate(
            self.caches["nodes"].items(),
            self.writes.overlay_pods(self.caches["pods"].items()),
            self.caches["foreign"].items(),
            groups,
            self.caches["queues"].items(),
            namespaces,
            self.settings,
            now,
            self.caches["jobs"].items(),
            dra.Devices(
                self.caches["ResourceSlice"].items(),
                self.writes.overlay_claims(self.caches["ResourceClaim"].items()),
                self.caches["DeviceClass"].items(),
                self.cel_programs,
            )
            if "ResourceClaim" in self.caches
            else None,
            self.translated,
        )

    def cycle(self) -> core.Decisions | None:
        now = time.time()
        view = self.translate(now)
        if view.partial:
            self.writes.settle(view)
            self.wake.set()  # decide on what the settling left
            return None
        if view.releasing:  # their gangs wait in this pass, allocated anew in the next
            self.writes.release_claims(view.releasing)
            self.wake.set()
        self._accrue_usage(now, view)
        snapshot = core.Snapshot(
            now=now,
            nodes=tuple(view.nodes),
            queues=tuple(view.queues),
            pending=tuple(view.pending),
            running=tuple(view.running),
            usage=dict(self.usage),
            config=self.settings.policy,
            reservations=self.reservations,
        )
        started = time.perf_counter()
        decisions = self.decide(snapshot)
        spent = time.perf_counter() - started
        self.metrics.decided(spent)
        self.state.count("decide_calls")
        self.state.count("decide_seconds", spent)
        self.reservations = tuple(decisions.reservations)
        if self.settings.expected_start_depth and time.monotonic() - self.expected_at >= EXPECTED_EVERY_SECONDS:
            self.expected = expected_starts(snapshot, decisions, self.settings.expected_start_depth)
            self.expected_at = time.monotonic()
        held = self.writes.act(decisions, view, now) if self.leading() else {}  # else another replica acts
        if view.protecting and self.leading():
            self.writes.protect_claims(view.protecting.values())
        told = reporting.outcome(decisions, view, held, self.expected)
        log.debug(
            "pass: %d nodes, %d gangs waiting, %d running; %d bound, %d evicted, %d restarted, %d failed, "
            "%d reserved, %d held back; decide %.3f s",
            *(len(view.nodes), len(view.pending), len(view.running), len(told.bound), len(decisions.evictions)),
            *(len(decisions.restarts), len(decisions.failures), len(told.reserved), len(held), spent),
        )
        queues = {q["metadata"]["name"]: q for q in self.caches["queues"].items()}
        reporting.tell(self.reporter, self.metrics, told, view, queues, self.caches["pods"].items())
        self.state.publish(state_view(told, view, now, self.usage, spent))
        return decisions

    def _accrue_usage(self, now: float, view: Translation) -> None:
        """Per-queue usage since the last pass, by the host contract the simulator keeps too."""
        elapsed = 0.0 if self.usage_at is None else now - self.usage_at
        self.usage_at = now
        held = host.held_gpus(view.running)
        self.usage = host.accrue_usage(self.usage, held, elapsed, self.settings.policy.fair_share_half_life)
