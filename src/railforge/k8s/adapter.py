"""The gang scheduler on Kubernetes: informers in, ``decide()`` in the middle, bindings and evictions out.

One pass (``cycle``): read the informers' caches (with what this process wrote that the watches have not shown
yet), translate them (``translate``), settle gangs an interrupted run left partly bound, call the core, hand its
decisions to the write side (``writes``), and tell users why (``report``). Passes run on changes, at most once per
``min_period_seconds``, and at least every ``resync_seconds`` while gangs wait. Only the leader acts, and each of
its writes is fenced by its leadership; a standby replica keeps its caches warm.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import railforge.scheduler as core
from railforge.k8s.events import Reporter
from railforge.k8s.informer import Informer, Resource
from railforge.k8s.leader import LeaderElector
from railforge.k8s.metrics import SchedulerMetrics
from railforge.k8s.settings import Settings
from railforge.k8s.translate import (
    FAILED,
    GROUP_LABEL,
    REASON,
    REASON_CODE,
    Translation,
    timestamp,
    translate,
)
from railforge.k8s.views import PendingView, QueueView, RunningView, SchedulerState, StateView
from railforge.k8s.writes import PODGROUPS, WriteSide
from railforge.scheduler import host

log = logging.getLogger(__name__)

QUEUES = "/apis/railforge.io/v1alpha1/queues"


def _trim_pod(pod: dict) -> dict:
    pod["metadata"].pop("managedFields", None)
    status = pod.get("status") or {}
    pod["status"] = {"phase": status.get("phase")}
    return pod


def _trim_meta(obj: dict) -> dict:
    obj["metadata"].pop("managedFields", None)
    return obj


def _add(total: dict[str, int], extra: dict[str, int], sign: int = 1) -> None:
    for name, amount in extra.items():
        total[name] = total.get(name, 0) + sign * amount


def _in(seconds: float) -> str:
    return f"{max(0, round(seconds))}s" if seconds < 120 else f"{seconds / 60:.0f}m"


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
        self.wake = threading.Event()
        self.stopping = threading.Event()
        name = settings.scheduler_name
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
            "groups": Resource("PodGroup", PODGROUPS, trim=_trim_meta),
            "queues": Resource("Queue", QUEUES, trim=_trim_meta),
            "namespaces": Resource("Namespace", "/api/v1/namespaces", trim=_trim_meta),
        }
        self.caches = {key: Informer(api, resource, self.wake.set) for key, resource in self.informers.items()}
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
            self.state,
            self.metrics,
            self.reporter,
            self.wake.set,
        )
        self.reservations: tuple[core.Reservation, ...] = ()
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

    def leading(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.caches.values())

    def run(self) -> None:
        """The loop: a pass on every change (at most one per min period), and every resync period."""
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
            self.state.set_leader(leader, synced)
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

    # -- one pass ------------------------------------------------------------------------------------------------
    def translate(self, now: float) -> Translation:
        groups = {
            (g["metadata"]["namespace"], g["metadata"]["name"]): self.writes.overlay_owner(g)
            for g in self.caches["groups"].items()
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
        )

    def cycle(self) -> core.Decisions | None:
        now = time.time()
        view = self.translate(now)
        if view.partial:
            self.writes.settle(view)
            self.wake.set()  # decide on what the settling left
            return None
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
        held = self.writes.act(decisions, view, now) if self.leading() else {}  # else another replica acts
        self._report(decisions, view, snapshot, spent, held)
        return decisions

    def _accrue_usage(self, now: float, view: Translation) -> None:
        """Per-queue usage since the last pass, by the host contract the simulator keeps too."""
        elapsed = 0.0 if self.usage_at is None else now - self.usage_at
        self.usage_at = now
        held = host.held_gpus(view.running)
        self.usage = host.accrue_usage(self.usage, held, elapsed, self.settings.policy.fair_share_half_life)

    # -- telling users -------------------------------------------------------------------------------------------
    def _report(
        self, decisions: core.Decisions, view: Translation, snapshot: core.Snapshot, spent: float, held: dict
    ) -> None:
        """``held``: gangs decided bound that the write side kept waiting, and why."""
        binds = tuple(bind for bind in decisions.binds if bind.gang_name not in held)
        decisions = dataclasses.replace(decisions, binds=binds)
        reasons = dict(decisions.reasons)
        reasons.update(view.waiting)
        reasons.update(held)
        reserved = {r.gang_name: r for r in decisions.reservations}
        bound = {bind.gang_name for bind in decisions.binds}
        for problem in view.problems:
            if problem.kind == "Queue":
                obj = self.caches["queues"].get("", problem.name)
                if obj is not None:
                    self.reporter.event("Queue", obj, "InvalidSpec", problem.message, warning=True)
                    self.reporter.status("Queue", obj, {"usable": False, "message": problem.message})
        queue_objects = {q["metadata"]["name"]: q for q in self.caches["queues"].items()}
        bad_queues = {p.name for p in view.problems if p.kind == "Queue"}
        for name, obj in queue_objects.items():
            if name not in bad_queues:
                self.reporter.status("Queue", obj, {"usable": True, "message": ""})
        counts = self._pod_counts()
        for name, objects in view.gangs.items():
            reason = reasons.get(name)
            unbound = [pod for pod in objects.pods if not pod["spec"].get("nodeName")]
            if name in bound:
                phase, reason = "Scheduled", ""
            elif reason is None:
                phase = "Running" if not unbound else "Pending"
                reason = ""
            else:
                phase = "Failed" if objects.annotations().get(FAILED) else ("Pending" if unbound else "Running")
                if name in reserved:
                    reason = f"{reason} (reserved start in {_in(reserved[name].start - snapshot.now)})"
            code = str(getattr(reasons.get(name), "code", "")) if reason else ""
            warning = code.startswith("input.")
            label = "InvalidSpec" if warning else "Unschedulable"
            if reason and unbound and code != "input.min-member":  # a short gang is the PodGroup's matter
                for pod in unbound:
                    self.reporter.pod_condition(pod, label, reason)
                    self.reporter.event("Pod", pod, label, reason, warning=warning)
            if objects.group is not None:
                group = objects.group
                running, succeeded, failed = counts.get((objects.namespace, group["metadata"]["name"]), (0, 0, 0))
                if phase == "Running" and running < len(objects.pods):
                    phase = "Scheduled"
                status = {"phase": phase, "running": running, "succeeded": succeeded, "failed": failed}
                if phase == "Scheduled" and not (group.get("status") or {}).get("scheduleStartTime"):
                    status["scheduleStartTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                self.reporter.status("PodGroup", group, status)
                self.reporter.annotate("PodGroup", group, {REASON: reason or None, REASON_CODE: code or None})
                if reason and unbound:
                    self.reporter.event("PodGroup", group, label, reason, warning=warning)
        codes = {name: str(getattr(why, "code", "")) for name, why in reasons.items() if name not in bound}
        self.metrics.reasons(codes)
        self._publish(decisions, view, snapshot, reasons, reserved, spent)

    def _pod_counts(self) -> dict[tuple[str, str], tuple[int, int, int]]:
        counts: dict[tuple[str, str], list[int]] = {}
        for pod in self.caches["pods"].items():
            group = (pod["metadata"].get("labels") or {}).get(GROUP_LABEL)
            if not group:
                continue
            entry = counts.setdefault((pod["metadata"]["namespace"], group), [0, 0, 0])
            phase = (pod.get("status") or {}).get("phase")
            for index, wanted in enumerate(("Running", "Succeeded", "Failed")):
                entry[index] += phase == wanted
        return {key: tuple(value) for key, value in counts.items()}

    def _publish(self, decisions, view: Translation, snapshot, reasons, reserved, spent: float) -> None:
        bound = {bind.gang_name: bind for bind in decisions.binds}
        allocated: dict[str, dict[str, int]] = {}
        pending_demand: dict[str, dict[str, int]] = {}
        running_views = []
        for running in view.running:
            total = running.gang.total_requests()
            _add(allocated.setdefault(running.gang.queue, {}), total)
            running_views.append(
                RunningView(
                    running.gang.name,
                    running.gang.queue,
                    dict(running.placement),
                    host.gang_gpus(running.gang),
                    running.start_time,
                    running.borrowed,
                    running.backfilled_past,
                )
            )
        pending_views = []
        for gang in view.pending:
            total = gang.total_requests()
            if gang.name in bound:
                _add(allocated.setdefault(gang.queue, {}), total)
                bind = bound[gang.name]
                running_views.append(
                    RunningView(
                        gang.name,
                        gang.queue,
                        dict(bind.placement),
                        host.gang_gpus(gang),
                        snapshot.now,
                        bind.borrowed,
                        bind.backfilled_past,
                    )
                )
                continue
            _add(pending_demand.setdefault(gang.queue, {}), total)
            reservation = reserved.get(gang.name)
            pending_views.append(
                PendingView(
                    gang.name,
                    gang.queue,
                    len(gang.members),
                    host.gang_gpus(gang),
                    gang.submit_time,
                    reasons.get(gang.name, ""),
                    reservation.start if reservation else None,
                    reservation.nodes if reservation else (),
                )
            )
        for name, message in view.waiting.items():
            objects = view.gangs[name]
            unbound = [p for p in objects.pods if not p["spec"].get("nodeName")]
            if unbound:
                pending_views.append(
                    PendingView(
                        name,
                        "",
                        len(unbound),
                        0,
                        timestamp(objects.owner["metadata"].get("creationTimestamp"), snapshot.now),
                        message,
                    )
                )
        self.state.publish(
            StateView(
                leader=True,
                synced=True,
                queues=[
                    QueueView(
                        q.name,
                        q.parent,
                        dict(q.quota),
                        dict(q.limit),
                        q.over_quota_weight,
                        allocated.get(q.name, {}),
                        pending_demand.get(q.name, {}),
                        self.usage.get(q.name, 0.0),
                    )
                    for q in view.queues
                ],
                pending=pending_views,
                running=running_views,
                nodes={node.name: dict(node.allocatable) for node in view.nodes},
                topology={node.name: node.topology for node in view.nodes},
                problems=[str(problem) for problem in view.problems],
                last_decide_seconds=spent,
            )
        )
