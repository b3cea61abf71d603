"""What a pass tells users, from what the API server accepted: the PodGroups' phase, counts and reason, the waiting
pods' PodScheduled condition, the Queues' usability, Events and the reason metrics (``tell``), and the state the
dashboard and ``/metrics`` read (``state_view``). A gang the core decided bound but the write side held back is
told as waiting, with the write side's reason."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass

import railforge.scheduler as core
from railforge.k8s.annotations import (
    EXPECTED_START,
    FAILED,
    QUARANTINE,
    QUARANTINE_TAINT_VALUE,
    REASON,
    REASON_CODE,
    encode_expected_start,
)
from railforge.k8s.events import Reporter
from railforge.k8s.gangapis import joined
from railforge.k8s.metrics import SchedulerMetrics
from railforge.k8s.translate import (
    Translation,
    Waiting,
    add_amounts,
    gang_of,
    pod_requests,
    timestamp,
)
from railforge.k8s.views import PendingView, QueueView, RunningView, StateView
from railforge.scheduler import host


@dataclass(frozen=True)
class Outcome:
    """A pass's decisions as carried out: the binds the write side made, why every other gang waits (the core's
    reasons, the translation's and the write side's), and the reservations with their expected starts."""

    decisions: core.Decisions
    reasons: dict[str, str]
    reserved: dict[str, core.Reservation]
    expected: dict[str, float]  # waiting gang -> expected start (its reservation's, or the plan behind them)

    @property
    def bound(self) -> set[str]:
        return {bind.gang_name for bind in self.decisions.binds}


QUARANTINED_SHOWN = 3  # the most quarantined nodes a reason names


def outcome(
    decisions: core.Decisions, view: Translation, held: dict[str, Waiting], expected: dict[str, float]
) -> Outcome:
    """``held``: gangs decided bound that the write side kept waiting, and why; ``expected``: the planned starts
    (``railforge.scheduler.expected``)."""
    binds = [bind for bind in decisions.binds if bind.gang_name not in held]
    reasons: dict[str, str] = {**decisions.reasons, **view.waiting, **held}
    for name, avoid in view.avoiding.items():
        if name in decisions.reasons and name not in held:
            why = decisions.reasons[name]
            until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(avoid.until))
            note = f"; it keeps off {', '.join(avoid.nodes)}, where its last start failed, until {until}"
            reasons[name] = core.Reason(f"{why}{note}", why.code)
    if view.quarantined:
        held_off = "; ".join(
            f"node {node} is quarantined ({'; '.join(note.failed)}{', ' + note.at if note.at else ''})"
            for node, note in sorted(view.quarantined.items())[:QUARANTINED_SHOWN]
        )
        # a gang waiting for capacity or a reservation that does not tolerate the taint: those nodes are not its
        taint = core.Taint(QUARANTINE, QUARANTINE_TAINT_VALUE, "NoSchedule")
        for gang in view.pending:
            decided = decisions.reasons.get(gang.name)
            if (
                decided is not None
                and decided.code.startswith(("capacity.", "reserved."))
                and not gang.tolerates(taint)
            ):
                reasons[gang.name] = core.Reason(f"{reasons[gang.name]}; {held_off}", decided.code)
    reserved = {r.gang_name: r for r in decisions.reservations}
    waiting = {gang.name for gang in view.pending} - {bind.gang_name for bind in binds}
    starts = {**expected, **{name: r.start for name, r in reserved.items()}}  # planned a pass or two ago, or now
    expected_now = {name: start for name, start in starts.items() if name in waiting}
    return Outcome(dataclasses.replace(decisions, binds=binds), reasons, reserved, expected_now)


def tell(
    reporter: Reporter,
    metrics: SchedulerMetrics,
    told: Outcome,
    view: Translation,
    queues: dict[str, dict],
    pods: Iterable[dict],
) -> None:
    """Write what ``told`` means for every queue and gang of ``view`` (each write only when it changed)."""
    for problem in view.problems:
        if problem.kind == "Queue" and problem.name in queues:
            obj = queues[problem.name]
            reporter.event("Queue", obj, "InvalidSpec", problem.message, warning=True)
            reporter.status("Queue", obj, {"usable": False, "message": problem.message})
    bad_queues = {problem.name for problem in view.problems if problem.kind == "Queue"}
    for name, obj in queues.items():
        if name not in bad_queues:
            reporter.status("Queue", obj, {"usable": True, "message": ""})
    counts = _phase_counts(pods)
    bound = told.bound
    for name, objects in view.gangs.items():
        reason = told.reasons.get(name)
        unbound = [pod for pod in objects.pods if not pod["spec"].get("nodeName")]
        if name in bound:
            phase, reason = "Scheduled", ""
        elif reason is None:
            phase = "Running" if not unbound else "Pending"
            reason = ""
        else:
            phase = "Failed" if objects.annotations().get(FAILED) else ("Pending" if unbound else "Running")
        code = str(getattr(told.reasons.get(name), "code", "")) if reason else ""
        # kube-scheduler's words: the condition says Unschedulable, the Warning Event FailedScheduling
        label, event = (
            ("InvalidSpec", "InvalidSpec") if code.startswith("input.") else ("Unschedulable", "FailedScheduling")
        )
        if reason and unbound and code != "input.min-member":  # a short gang is the PodGroup's matter
            for pod in unbound:
                reporter.pod_condition(pod, label, reason)
                reporter.event("Pod", pod, event, reason, warning=True)
        if objects.group is not None and objects.api is not None:
            group, kind = objects.group, objects.kind
            phase_counts = counts.get(objects.name, (0, 0, 0))
            if phase == "Running" and phase_counts[0] < len(objects.pods):
                phase = "Scheduled"
            reporter.status(kind, group, objects.api.status(group, phase, phase_counts, reason))
            start = told.expected.get(name) if unbound and name not in bound else None
            expected = encode_expected_start(start) if start is not None else None
            reporter.annotate(
                kind, group, {REASON: reason or None, REASON_CODE: code or None, EXPECTED_START: expected}
            )
            if reason and unbound:
                reporter.event(kind, group, event, reason, warning=True)
    metrics.reasons({name: str(getattr(why, "code", "")) for name, why in told.reasons.items() if name not in bound})


def _phase_counts(pods: Iterable[dict]) -> dict[str, tuple[int, int, int]]:
    """Gang -> its pods Running, Succeeded, Failed (the gangs of PodGroups)."""
    counts: dict[str, list[int]] = {}
    for pod in pods:
        if joined(pod) is None:
            continue
        entry = counts.setdefault(gang_of(pod), [0, 0, 0])
        phase = (pod.get("status") or {}).get("phase")
        for index, wanted in enumerate(("Running", "Succeeded", "Failed")):
            entry[index] += phase == wanted
    return {key: (entry[0], entry[1], entry[2]) for key, entry in counts.items()}


def member_gpus(gang: core.Gang) -> dict[str, int]:
    return {member.name: member.requests.get(core.GPU, 0) for member in gang.members}


def state_view(told: Outcome, view: Translation, now: float, usage: dict[str, float], spent: float) -> StateView:
    """The pass as the dashboard shows it: queues with what they hold and what waits, the gangs running (those
    bound in this pass among them) and waiting, with reasons and reserved starts."""
    bound = {bind.gang_name: bind for bind in told.decisions.binds}
    allocated: dict[str, dict[str, int]] = {}
    pending_demand: dict[str, dict[str, int]] = {}
    running_views = []
    for running in view.running:
        add_amounts(allocated.setdefault(running.gang.queue, {}), running.gang.total_requests())
        running_views.append(
            RunningView(
                running.gang.name,
                running.gang.queue,
                dict(running.placement),
                host.gang_gpus(running.gang),
                member_gpus(running.gang),
                running.start_time,
                running.borrowed,
                running.backfilled_past,
            )
        )
    pending_views = []
    for gang in view.pending:
        total = gang.total_requests()
        if gang.name in bound:
            add_amounts(allocated.setdefault(gang.queue, {}), total)
            bind = bound[gang.name]
            running_views.append(
                RunningView(
                    gang.name,
                    gang.queue,
                    dict(bind.placement),
                    host.gang_gpus(gang),
                    member_gpus(gang),
                    now,
                    bind.borrowed,
                    bind.backfilled_past,
                )
            )
            continue
        add_amounts(pending_demand.setdefault(gang.queue, {}), total)
        reservation = told.reserved.get(gang.name)
        pending_views.append(
            PendingView(
                gang.name,
                gang.queue,
                len(gang.members),
                host.gang_gpus(gang),
                gang.submit_time,
                told.reasons.get(gang.name, ""),
                reservation.start if reservation else None,
                reservation.nodes if reservation else (),
                told.expected.get(gang.name),
            )
        )
    for name, message in view.waiting.items():
        objects = view.gangs[name]
        unbound = [p for p in objects.pods if not p["spec"].get("nodeName")]
        if unbound:
            submitted = timestamp(objects.owner["metadata"].get("creationTimestamp"), now)
            gpus = sum(pod_requests(pod).get(core.GPU, 0) for pod in unbound)
            pending_views.append(PendingView(name, objects.queue, len(unbound), gpus, submitted, message))
    queues = [
        QueueView(
            q.name,
            q.parent,
            dict(q.quota),
            dict(q.limit),
            q.over_quota_weight,
            allocated.get(q.name, {}),
            pending_demand.get(q.name, {}),
            usage.get(q.name, 0.0),
        )
        for q in view.queues
    ]
    return StateView(
        leader=True,
        synced=True,
        queues=queues,
        pending=pending_views,
        running=running_views,
        nodes={node.name: dict(node.allocatable) for node in view.nodes},
        topology={node.name: node.topology for node in view.nodes},
        problems=list(dict.fromkeys(str(problem) for problem in view.problems)),
        last_decide_seconds=spent,
    )
