"""The gang scheduler on Kubernetes: informers in, ``decide()`` in the middle, bindings and evictions out.

One pass (``cycle``): read the informers' caches (plus the pods this process bound or deleted that the watch has
not shown yet), translate them (``translate``), settle gangs an interrupted run left partly bound, call the core,
carry out its decisions in the order the core documents (evictions, restarts and failures, then binds; every
member of a gang in parallel), and tell users why (``report``). Passes run on changes, at most once per
``min_period_seconds``, and at least every ``resync_seconds`` while gangs wait. Only the leader acts; a standby
replica keeps its caches warm.

Crash safety: before binding a gang of several pods the adapter writes the placement (pod uid -> node) on the
PodGroup. A run that finds a gang partly bound completes it on that placement when every unbound pod still fits
its planned node, and otherwise releases it: it deletes the bound pods, so the gang's owner recreates them and
the gang is scheduled again whole. Pods already bound always count as placed, and a Binding names the pod's uid,
so no pod is ever bound twice or bound in a recreated copy.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from kubernetes.client import ApiException

import railforge.scheduler as core
from railforge.k8s import rest
from railforge.k8s.events import Reporter
from railforge.k8s.informer import Informer, Resource
from railforge.k8s.leader import LeaderElector
from railforge.k8s.metrics import SchedulerMetrics
from railforge.k8s.settings import Settings
from railforge.k8s.translate import (
    BACKFILLED_PAST,
    BORROWED,
    FAILED,
    GROUP_LABEL,
    NOT_BEFORE,
    PLACEMENT,
    REASON,
    REASON_CODE,
    RESTARTS,
    STARTED_AT,
    GangObjects,
    Translation,
    pod_requests,
    timestamp,
    translate,
)
from railforge.k8s.views import PendingView, QueueView, RunningView, SchedulerState, StateView

log = logging.getLogger(__name__)

PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
# kind of removal -> (what the decision log says, counter, Event reason)
REMOVALS = {
    "evict": ("evicted ({cause})", "evictions", "Evicted"),
    "restart": ("restarted", "restarts", "Restarted"),
    "fail": ("failed", "failures", "Failed"),
    "release": ("released", "releases", "Released"),
}
QUEUES = "/apis/railforge.io/v1alpha1/queues"


def _trim_pod(pod: dict) -> dict:
    pod["metadata"].pop("managedFields", None)
    status = pod.get("status") or {}
    pod["status"] = {"phase": status.get("phase")}
    return pod


def _trim_meta(obj: dict) -> dict:
    obj["metadata"].pop("managedFields", None)
    return obj


def _gpus(resources: dict[str, int]) -> int:
    return resources.get(core.GPU, 0)


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
        # pod uid -> (node, annotations): bound by this process, not yet seen bound in the cache
        self.assumed: dict[str, tuple[str, dict[str, str]]] = {}
        self.deleted: set[str] = set()  # pod uids this process deleted or evicted
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
    def _our_pods(self) -> list[dict]:
        pods = []
        for pod in self.caches["pods"].items():
            uid = pod["metadata"]["uid"]
            if pod["spec"].get("nodeName"):
                self.assumed.pop(uid, None)
            elif uid in self.assumed:
                node, annotations = self.assumed[uid]
                meta = dict(pod["metadata"], annotations={**(pod["metadata"].get("annotations") or {}), **annotations})
                pod = dict(pod, metadata=meta, spec=dict(pod["spec"], nodeName=node))
            if uid in self.deleted and not pod["spec"].get("nodeName"):
                continue  # deleted before it was bound: gone as far as we are concerned
            pods.append(pod)
        live_uids = {pod["metadata"]["uid"] for pod in self.caches["pods"].items()}
        self.deleted &= live_uids
        for uid in [uid for uid in self.assumed if uid not in live_uids]:
            del self.assumed[uid]
        return pods

    def translate(self, now: float) -> Translation:
        groups = {(g["metadata"]["namespace"], g["metadata"]["name"]): g for g in self.caches["groups"].items()}
        namespaces = {n["metadata"]["name"]: n for n in self.caches["namespaces"].items()}
        return translate(
            self.caches["nodes"].items(),
            self._our_pods(),
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
            free = self._free_beside_bound(view)
            for objects in view.partial:
                self._settle_partial(objects, free)
            self.wake.set()  # decide on what the settling left
            return None
        self._decay_usage(now, view)
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
        self._execute(decisions, view, now)
        self._report(decisions, view, snapshot, spent)
        return decisions

    def _decay_usage(self, now: float, view: Translation) -> None:
        """Per-queue GPU-seconds decayed with the policy's half-life, as the simulator keeps them."""
        elapsed = 0.0 if self.usage_at is None else now - self.usage_at
        self.usage_at = now
        half_life = self.settings.policy.fair_share_half_life
        usage = core.decay_usage(self.usage, elapsed, half_life)
        weight = half_life / math.log(2) * (1 - 0.5 ** (elapsed / half_life)) if half_life > 0 else elapsed
        for running in view.running:
            gpus = sum(_gpus(m.requests) for m in running.gang.members)
            usage[running.gang.queue] = usage.get(running.gang.queue, 0.0) + gpus * weight
        self.usage = usage

    # -- carrying decisions out ----------------------------------------------------------------------------------
    def _execute(self, decisions: core.Decisions, view: Translation, now: float) -> None:
        if not self.leading():
            return  # leadership lost during the pass: another replica acts now
        leaving: set[str] = set()  # nodes whose pods are being deleted: not bound to until they are gone
        for eviction in decisions.evictions:
            leaving |= self._remove(view.gangs[eviction.gang_name], eviction.reason, "evict", eviction.cause)
        for restart in decisions.restarts:
            objects = view.gangs[restart.gang_name]
            restarts = int(objects.annotations().get(RESTARTS, 0) or 0) + 1
            self._patch_owner(objects, {RESTARTS: str(restarts), NOT_BEFORE: repr(restart.not_before), PLACEMENT: None})
            leaving |= self._remove(objects, restart.reason, "restart")
        for failure in decisions.failures:
            objects = view.gangs[failure.gang_name]
            self._patch_owner(objects, {FAILED: failure.reason[:1000]})
            leaving |= self._remove(objects, failure.reason, "fail")
        binds = [bind for bind in decisions.binds if not leaving & set(bind.placement.values())]
        for bind in decisions.binds:
            if bind not in binds:
                self.state.record("defer", bind.gang_name, "waits for the pods it replaces to leave")
                self.wake.set()
        if not binds:
            return
        planning = time.perf_counter()
        planned = [bind for bind in binds if len(bind.placement) > 1]
        intents = list(self.pool.map(lambda bind: self._write_plan(view.gangs[bind.gang_name], bind), planned))
        refused = {bind.gang_name for bind, ok in zip(planned, intents, strict=True) if not ok}
        self.state.count("plan_seconds", time.perf_counter() - planning)
        jobs = []
        for bind in binds:
            if bind.gang_name in refused:
                continue
            objects = view.gangs[bind.gang_name]
            by_name = {pod["metadata"]["name"]: pod for pod in objects.pods}
            annotations = {STARTED_AT: repr(now), BORROWED: "true" if bind.borrowed else "false"}
            if bind.backfilled_past:
                annotations[BACKFILLED_PAST] = bind.backfilled_past
            for member, node in bind.placement.items():
                jobs.append((bind.gang_name, by_name[member], node, annotations))
        binding = time.perf_counter()
        results = list(self.pool.map(lambda job: self._bind(*job[1:]), jobs))
        self.state.count("bind_seconds", time.perf_counter() - binding)
        submitted = {gang.name: gang for gang in view.pending}
        bound: dict[str, int] = {}
        for (gang, *_), ok in zip(jobs, results, strict=True):
            bound[gang] = bound.get(gang, 0) + ok
        for bind in binds:
            if bind.gang_name in refused:
                continue
            nodes = len(set(bind.placement.values()))
            detail = f"{bound.get(bind.gang_name, 0)}/{len(bind.placement)} pods on {nodes} nodes"
            if bind.backfilled_past:
                detail += f", backfilled past {bind.backfilled_past}"
            self.state.record("bind", bind.gang_name, detail)
            self.state.count("gangs_bound")
            self.state.count("pods_bound", bound.get(bind.gang_name, 0))
            waited = submitted[bind.gang_name]
            self.metrics.bound(waited.queue, waited.submit_time, bound.get(bind.gang_name, 0), len(bind.placement))
            objects = view.gangs[bind.gang_name]
            for pod in objects.pods:
                if pod["metadata"]["name"] in bind.placement:
                    self.reporter.event(
                        "Pod",
                        pod,
                        "Scheduled",
                        f"gang {bind.gang_name}: bound to {bind.placement[pod['metadata']['name']]}",
                    )
            if objects.group is not None:
                self.reporter.event("PodGroup", objects.group, "Scheduled", f"bound: {detail}")

    def _write_plan(self, objects: GangObjects, bind: core.Bind) -> bool:
        """Write the gang's placement on its owner before binding (what a restart completes)."""
        by_name = {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in objects.pods}
        plan = {by_name[member]: node for member, node in sorted(bind.placement.items())}
        try:
            self._patch_owner(objects, {PLACEMENT: json.dumps(plan, separators=(",", ":"))})
        except ApiException as error:
            log.warning("%s: could not write its placement, not binding it: %s", bind.gang_name, rest.api_error(error))
            return False
        return True

    def _patch_owner(self, objects: GangObjects, annotations: dict[str, str | None]) -> None:
        meta = objects.owner["metadata"]
        if objects.group is not None:
            path = f"{PODGROUPS.replace('/podgroups', '')}/namespaces/{objects.namespace}/podgroups/{meta['name']}"
        else:
            path = f"/api/v1/namespaces/{objects.namespace}/pods/{meta['name']}"
        body = {"metadata": {"annotations": annotations}}
        rest.call(self.api, "PATCH", path, body=body, content_type=rest.MERGE_PATCH)

    def _bind(self, pod: dict, node: str, annotations: dict[str, str]) -> bool:
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],  # never a recreated pod of the same name
                "annotations": annotations,  # the API server copies them onto the pod
            },
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding"
            rest.call(self.api, "POST", path, body=body)
        except ApiException as error:
            log.warning("bind %s/%s -> %s: %s", meta["namespace"], meta["name"], node, rest.api_error(error))
            self.state.count("bind_errors")
            return False
        self.assumed[meta["uid"]] = (node, annotations)
        return True

    def _remove(self, objects: GangObjects, reason: str, kind: str, cause: str = "") -> set[str]:
        """Evict (reclaim, preemption) or delete (restart, failure) every bound pod of a gang, in parallel; the
        nodes they leave."""
        pods = [
            pod
            for pod in objects.pods
            if pod["spec"].get("nodeName")
            and not pod["metadata"].get("deletionTimestamp")
            and pod["metadata"]["uid"] not in self.deleted
        ]
        grace = self.settings.eviction_grace_seconds

        def remove(pod: dict) -> None:
            meta = pod["metadata"]
            options = {} if grace is None else {"gracePeriodSeconds": grace}
            options["preconditions"] = {"uid": meta["uid"]}
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
            try:
                if kind == "evict":
                    body = {
                        "apiVersion": "policy/v1",
                        "kind": "Eviction",
                        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                        "deleteOptions": options,
                    }
                    rest.call(self.api, "POST", path + "/eviction", body=body)
                else:
                    rest.call(self.api, "DELETE", path, body=options)
            except ApiException as error:
                if error.status != 404:
                    log.warning("%s %s/%s: %s", kind, meta["namespace"], meta["name"], rest.api_error(error))
                    return
            self.deleted.add(meta["uid"])

        list(self.pool.map(remove, pods))
        what, counter, event = REMOVALS[kind]
        what = what.format(cause=cause)
        self.state.record(kind, objects.name, f"{what}: {reason}")
        self.state.count(counter)
        self.metrics.removed(cause or kind)
        target = ("PodGroup", objects.group) if objects.group is not None else ("Pod", objects.pods[0])
        self.reporter.event(*target, event, f"{what}: {reason}", warning=True)
        return {pod["spec"]["nodeName"] for pod in pods}

    @staticmethod
    def _free_beside_bound(view: Translation) -> dict[str, dict[str, int]]:
        """Free resources of the usable nodes, beside every pod of ours bound now (running and partial gangs)."""
        free = {node.name: dict(node.allocatable) for node in view.nodes if node.ready and node.schedulable}
        for running in view.running:
            requests = {member.name: member.requests for member in running.gang.members}
            for member, node in running.placement.items():
                _add(free.setdefault(node, {}), requests[member], -1)
        for objects in view.partial:
            for pod in objects.pods:
                if pod["spec"].get("nodeName"):
                    _add(free.setdefault(pod["spec"]["nodeName"], {}), pod_requests(pod), -1)
        return free

    def _settle_partial(self, objects: GangObjects, free: dict[str, dict[str, int]]) -> None:
        """Complete a gang a previous run left partly bound, on its written placement, if every unbound pod still
        fits its planned node; otherwise release it (delete its bound pods: the owner recreates them). ``free``
        is what the nodes have left; a completed gang takes its share of it."""
        if not self.leading():
            return
        plan = objects.planned()
        bound = [pod for pod in objects.pods if pod["spec"].get("nodeName")]
        todo = [pod for pod in objects.pods if not pod["spec"].get("nodeName") and pod["metadata"]["uid"] in plan]
        left = {node: dict(room) for node, room in free.items()}
        fits = True
        for pod in todo:
            node = plan[pod["metadata"]["uid"]]
            if node not in left:
                fits = False
                break
            _add(left[node], pod_requests(pod), -1)
            fits &= all(amount >= 0 for amount in left[node].values())
        if fits:
            annotations = {
                key: value
                for key, value in (bound[0]["metadata"].get("annotations") or {}).items()
                if key in (STARTED_AT, BORROWED, BACKFILLED_PAST)
            }
            free.update(left)
            done = sum(self.pool.map(lambda pod: self._bind(pod, plan[pod["metadata"]["uid"]], annotations), todo))
            log.info("%s: completed an interrupted bind, %d/%d more pods", objects.name, done, len(todo))
            self.state.record("complete", objects.name, f"completed an interrupted bind: {done}/{len(todo)} more pods")
            self.state.count("partial_completed")
            return
        log.info("%s: released a gang bound in part whose placement no longer fits", objects.name)
        self._remove(objects, "a previous run bound it in part and its placement no longer fits", "release")
        self._patch_owner(objects, {PLACEMENT: None})

    # -- telling users -------------------------------------------------------------------------------------------
    def _report(self, decisions: core.Decisions, view: Translation, snapshot: core.Snapshot, spent: float) -> None:
        reasons = dict(decisions.reasons)
        reasons.update(view.waiting)
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
                    _gpus(total),
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
                        _gpus(total),
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
                    _gpus(total),
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
