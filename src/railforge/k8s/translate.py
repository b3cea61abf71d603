"""Kubernetes objects (as the API's JSON) -> the core's model: nodes, queues, pending and running gangs.

Nothing here calls the API. What cannot be used is kept out of the snapshot and reported as a ``Problem`` that
names the object, the field and what was expected, so one bad object never stops the others.
"""

from __future__ import annotations

import calendar
import dataclasses
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, TypeVar

from railforge.k8s import dra, podaffinity
from railforge.k8s.annotations import (
    AVOID,
    FAILED,
    STARTED_AT,
    Avoid,
    Backoff,
    Quarantine,
    Start,
    decode_placement,
)
from railforge.k8s.gangapis import NATIVE, SCHEDULE_TIMEOUT, SCHEDULER_PLUGINS, GangApi, joined
from railforge.k8s.quantity import resource_map
from railforge.k8s.settings import LABEL_PREFIX, Settings, TopologyLevel
from railforge.scheduler import (
    Gang,
    Member,
    Node,
    NodeSelectorRequirement,
    Queue,
    RunningGang,
    Spread,
    Taint,
    Together,
    Toleration,
    TopologyConstraint,
    host,
    topology_path,
)

T = TypeVar("T")
QUEUE_API = ("railforge.io", "v1alpha1", "queues")
# what users set; what the scheduler writes and reads back is in annotations.py
RUNTIME = LABEL_PREFIX + "runtime"
TOPOLOGY_REQUIRED = LABEL_PREFIX + "topology-required"
TOPOLOGY_PREFERRED = LABEL_PREFIX + "topology-preferred"
MAINTENANCE_FROM = LABEL_PREFIX + "maintenance-from"  # on a Node: reserved for maintenance from then on
TERMINAL = ("Succeeded", "Failed")
HOSTNAME = "kubernetes.io/hostname"  # a pod's nodeSelector on it pins the pod to that node
JOB_BACKOFF_LIMIT = 6  # a Job's spec.backoffLimit when unset
JOB_TRACKING = "batch.kubernetes.io/job-tracking"  # the finalizer a Job keeps on its pods until it counted them
INDEX_FAILURES = "batch.kubernetes.io/job-index-failure-count"  # an indexed Job's pod: its index's failures so far
FAILURE_ACTIONS = ("FailJob", "FailIndex", "Ignore", "Count")  # a podFailurePolicy rule's, as batch/v1 has them
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")


@dataclass(frozen=True)
class Problem:
    """An object the scheduler cannot use as it is, and why (named field, expected value)."""

    kind: str  # Pod, PodGroup, Queue, Node
    namespace: str | None
    name: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind} {'/'.join(filter(None, (self.namespace, self.name)))}: {self.message}"


class Waiting(str):
    """Why the adapter keeps a gang from the core: the sentence, with a stable ``code`` as the core's reasons have
    (docs/scheduler.md lists both)."""

    __slots__ = ("code",)
    code: str

    def __new__(cls, code: str, text: str) -> Waiting:
        waiting = super().__new__(cls, text)
        waiting.code = code
        return waiting

    def __reduce__(self) -> tuple:  # copies (the published state is a deep copy) keep the code
        return Waiting, (self.code, str(self))


@dataclass
class GangObjects:
    """One gang's Kubernetes side: its PodGroup and the API it is of (None for a lone pod) and its live pods."""

    name: str
    namespace: str
    api: GangApi | None
    group: dict | None
    pods: list[dict]
    queue: str = ""  # the queue it names, once translated (what the decision log shows)
    # a bound member has succeeded: the gang is ending (members of a gang end together), so what the others hold is
    # expected back now, and a gang waiting for it can be reserved there instead of smaller ones backfilling it
    ending: bool = False
    jobs: Mapping[str, dict] = field(default_factory=dict)  # uid -> Job (batch/v1): the cluster's, read by controller

    @property
    def owner(self) -> dict:
        """Where the gang's own annotations live: the PodGroup, or the lone pod."""
        return self.group if self.group is not None else self.pods[0]

    @property
    def kind(self) -> str:
        """The owner's kind, with its API group for a PodGroup (two APIs have one)."""
        return self.api.kind if self.group is not None and self.api is not None else "Pod"

    @property
    def owner_name(self) -> str:
        return self.owner["metadata"]["name"]

    def annotations(self) -> dict:
        return self.owner["metadata"].get("annotations") or {}

    @property
    def min_member(self) -> Any:
        """The PodGroup's minimum count as written (None without one); translation checks its type."""
        return self.api.min_count(self.group) if self.group is not None and self.api is not None else None

    def owner_limit(self, restarts: int) -> tuple[int | None, str]:
        """The restarts the Jobs controlling its pods allow, ``restarts`` (the gang's so far) included (None: no Job
        controls one), and why none more when a Job's own rule says so ("" otherwise: its count). A Job counts each
        pod of its own that fails or is deleted, against ``backoffLimitPerIndex`` per index when set, else against
        ``backoffLimit`` (default 6) for all of them together, and fails the job past it. What it counted already
        comes first: its ``status.failed`` (with the uids it is counting), and each index's failures as written on its
        pod. The next restart then costs each of its pods not counted yet (a failed one still carrying the Job's
        tracking finalizer, unless its ``podFailurePolicy`` ignores it, and every one it removes), each later one all
        of its pods in the gang. An MPIJob's launcher is the one pod of its launcher Job (limit:
        ``runPolicy.backoffLimit``)."""
        owned: dict[str, list[dict]] = {}
        for pod in self.pods:
            for ref in pod["metadata"].get("ownerReferences") or []:
                if ref.get("controller") and ref.get("uid") in self.jobs:
                    owned.setdefault(ref["uid"], []).append(pod)
        for uid, pods in owned.items():
            if why := _ended_by_policy(self.jobs[uid], pods):
                return restarts, why
        left = [_restarts_left(self.jobs[uid], pods) for uid, pods in owned.items()]
        return (restarts + min(left) if left else None), ""

    def planned(self) -> dict[str, str]:
        """Pod uid -> node of the placement written before binding ({} when none)."""
        return decode_placement(self.annotations())


@dataclass
class Translation:
    nodes: list[Node] = field(default_factory=list)
    queues: list[Queue] = field(default_factory=list)
    pending: list[Gang] = field(default_factory=list)
    running: list[RunningGang] = field(default_factory=list)
    gangs: dict[str, GangObjects] = field(default_factory=dict)  # every gang by name
    partial: list[GangObjects] = field(default_factory=list)  # bound in part by an interrupted bind
    waiting: dict[str, Waiting] = field(default_factory=dict)  # gang -> why it is kept from the core
    problems: list[Problem] = field(default_factory=list)
    avoiding: dict[str, Avoid] = field(default_factory=dict)  # waiting gang -> the failed nodes it keeps off
    quarantined: dict[str, Quarantine] = field(default_factory=dict)  # node -> what quarantined it
    devices: dra.Devices | None = None  # DRA: the published devices and the claims holding them
    claims: dict[str, dra.GangClaims] = field(default_factory=dict)  # pending gang -> its pods' ResourceClaims
    # node -> room for pods' own claims (dra.GangClaims.slot_name -> how many such pods; devices/<class> -> its free
    # devices), added to its allocatable
    claim_slots: dict[str, dict[str, int]] = field(default_factory=dict)
    releasing: list[dra.Claim] = field(default_factory=list)  # claims an interrupted pass allocated, to release
    # waiting pods' claims to give the delete protection, by (namespace, name): once, whichever gangs share them
    protecting: dict[tuple[str, str], dict] = field(default_factory=dict)


def timestamp(text: str | None, default: float) -> float:
    """RFC 3339 seconds (what metadata.creationTimestamp holds) as epoch seconds."""
    seconds = _epoch(text) if text else None
    return default if seconds is None else seconds


@lru_cache(maxsize=65536)
def _epoch(text: str) -> float | None:
    """Kept: every pass reads the creation time of every gang, and strptime is slow."""
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def runtime_seconds(text: str) -> float:
    """``railforge.io/runtime``: seconds (``3600``) or a duration (``1h30m``, ``90s``)."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        match = _DURATION.match(text)
        if not text or match is None:
            raise ValueError(f"{text!r}; expected seconds (3600) or a duration such as 1h30m") from None
        hours, minutes, seconds = (float(part or 0) for part in match.groups())
        value = hours * 3600 + minutes * 60 + seconds
    if not value > 0 or math.isinf(value):
        raise ValueError(f"{text!r}; expected a duration > 0")
    return value


def node_topology(node_name: str, labels: Mapping[str, str], levels: Iterable[TopologyLevel]) -> tuple[str, ...]:
    """A node's topology path, widest level first, from its labels (``topology_path``: a level's first label
    the node carries names its domain; a per-node value such as ``railforge.io/nvlink-domain: node`` ends the
    path, so nodes that share it never form one domain)."""
    return topology_path(labels, ((level.labels, level.per_node_values) for level in levels))


def _ready(node: dict) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def to_node(obj: dict, levels: tuple[TopologyLevel, ...], used: Mapping[str, int]) -> Node:
    """A core Node; ``used``: what pods the scheduler does not place already take on it."""
    meta, spec = obj["metadata"], obj.get("spec") or {}
    name = meta["name"]
    allocatable = resource_map((obj.get("status") or {}).get("allocatable") or {}, "status.allocatable")
    for resource, amount in used.items():
        if resource in allocatable:
            allocatable[resource] = max(0, allocatable[resource] - amount)
    labels = meta.get("labels") or {}
    taints = tuple(
        Taint(t["key"], t.get("value") or "", t["effect"])
        for t in spec.get("taints") or []
        if t.get("effect") in ("NoSchedule", "PreferNoSchedule", "NoExecute")
    )
    maintenance = (meta.get("annotations") or {}).get(MAINTENANCE_FROM)
    maintenance_from = None
    if maintenance is not None:
        maintenance_from = timestamp(maintenance, math.nan)
        if math.isnan(maintenance_from):
            raise ValueError(
                f"annotation {MAINTENANCE_FROM} is {maintenance!r}; expected a time as 2026-12-01T02:00:00Z"
            )
    return Node(
        name=name,
        allocatable=allocatable,
        labels=labels,
        taints=taints,
        schedulable=not spec.get("unschedulable", False),
        ready=_ready(obj),
        topology=node_topology(name, labels, levels),
        maintenance_from=maintenance_from,
    )


def add_amounts(total: dict[str, int], extra: Mapping[str, int], sign: int = 1) -> None:
    """Add (or with ``sign`` -1, take) ``extra``'s amounts to ``total``, resource by resource."""
    for name, amount in extra.items():
        total[name] = total.get(name, 0) + sign * amount


def pod_requests(pod: dict) -> dict[str, int]:
    """What a pod takes on its node: the larger of its containers' summed requests and its largest init
    container, plus its overhead and one ``pods`` slot."""
    spec = pod["spec"]

    def requests(container: dict) -> dict[str, int]:
        return resource_map((container.get("resources") or {}).get("requests") or {}, "resources.requests")

    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        for name, amount in requests(container).items():
            total[name] = total.get(name, 0) + amount
    for container in spec.get("initContainers") or []:
        for name, amount in requests(container).items():
            total[name] = max(total.get(name, 0), amount)
    for name, amount in resource_map(spec.get("overhead") or {}, "spec.overhead").items():
        total[name] = total.get(name, 0) + amount
    total["pods"] = total.get("pods", 0) + 1
    return total


def queues_from(objects: Iterable[dict], default_queue: str) -> tuple[list[Queue], list[Problem]]:
    """Core queues from Queue objects. A queue that cannot be used (malformed quantity, unknown parent, a parent
    cycle) is left out with a Problem, and so are its children; the default queue exists even when no object
    names it (no quota, weight 1)."""
    problems: list[Problem] = []
    candidates: dict[str, Queue] = {}
    for obj in objects:
        name = obj["metadata"]["name"]
        spec = obj.get("spec") or {}
        try:
            candidates[name] = _queue(name, spec)
        except (ValueError, TypeError) as error:
            problems.append(Problem("Queue", None, name, str(error)))
    usable: dict[str, Queue] = {}
    for name in sorted(candidates):
        chain, current = [name], candidates[name]
        while current.parent is not None:
            if current.parent in chain:
                cycle = " -> ".join((*chain[chain.index(current.parent) :], current.parent))
                message = f"spec.parentQueue forms a cycle ({cycle}); expected a tree"
                problems.append(Problem("Queue", None, name, message))
                break
            if current.parent not in candidates:
                problems.append(
                    Problem(
                        "Queue",
                        None,
                        name,
                        f"spec.parentQueue of {current.name} names {current.parent!r}, which is not a usable Queue",
                    )
                )
                break
            chain.append(current.parent)
            current = candidates[current.parent]
        else:
            usable[name] = candidates[name]
    if default_queue not in usable and default_queue not in candidates:
        usable[default_queue] = Queue(default_queue)
    return list(usable.values()), problems


def _queue(name: str, spec: dict) -> Queue:
    resources = spec.get("resources") or {}
    if not isinstance(resources, dict):
        raise ValueError(f"spec.resources is {resources!r}; expected a mapping of resource name to quota/limit")
    quota: dict[str, int] = {}
    limit: dict[str, int] = {}
    for resource, bounds in resources.items():
        if not isinstance(bounds, dict):
            raise ValueError(f"spec.resources[{resource}] is {bounds!r}; expected a mapping with quota and/or limit")
        for key, target in (("quota", quota), ("limit", limit)):
            if bounds.get(key) is not None:
                target.update(resource_map({resource: bounds[key]}, f"spec.resources.{key}"))
    weight = spec.get("overQuotaWeight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
        raise ValueError(f"spec.overQuotaWeight is {weight!r}; expected a number >= 0")
    priority = spec.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValueError(f"spec.priority is {priority!r}; expected a whole number")
    return Queue(
        name=name,
        parent=spec.get("parentQueue") or None,
        quota=quota,
        limit=limit,
        over_quota_weight=float(weight),
        priority=priority,
    )


def gang_of(pod: dict) -> str:
    """A pod's gang name: ``namespace/podgroup`` (scheduler-plugins'), ``namespace/scheduling.k8s.io/podgroup``
    (Kubernetes' own: a PodGroup of each may share a name), or ``namespace/pod/name`` for a pod on its own."""
    meta = pod["metadata"]
    group = joined(pod)
    if group is None:
        return f"{meta['namespace']}/pod/{meta['name']}"
    api, name = group
    return f"{meta['namespace']}/{name}" if api is SCHEDULER_PLUGINS else f"{meta['namespace']}/{api.group}/{name}"


def _ended_by_policy(job: dict, pods: list[dict]) -> str:
    """Why ``job`` ends whatever a restart does, when its ``podFailurePolicy`` ends the job or the index of one of
    ``pods`` that failed; "" otherwise."""
    for pod in pods:
        if _failed(pod) and (action := failure_action(job, pod)) in ("FailJob", "FailIndex"):
            what = "the job" if action == "FailJob" else "the pod's index"
            name = job["metadata"].get("name")
            return f"Job {name}'s podFailurePolicy ends {what} on pod {pod['metadata']['name']} ({action})"
    return ""


def _restarts_left(job: dict, pods: list[dict]) -> int:
    """The restarts ``job`` survives from now on, ``pods`` being its pods in the gang (``owner_limit``)."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    per_index = spec.get("backoffLimitPerIndex")
    if per_index is not None:  # each index's next pod counts once a restart
        failures = [int((pod["metadata"].get("annotations") or {}).get(INDEX_FAILURES, 0)) for pod in pods]
        return max(0, int(per_index) - max(failures, default=0))
    counting = set((status.get("uncountedTerminatedPods") or {}).get("failed") or [])
    counted = int(status.get("failed") or 0) + len(counting)
    uncounted = 0
    for pod in pods:
        if pod["metadata"].get("uid") in counting:
            continue
        if live(pod):
            uncounted += 1
        elif _failed(pod) and JOB_TRACKING in (pod["metadata"].get("finalizers") or []):
            uncounted += failure_action(job, pod) != "Ignore"
    room = int(spec.get("backoffLimit", JOB_BACKOFF_LIMIT)) - counted - uncounted
    return 0 if room < 0 else 1 + room // len(pods)


def failure_action(job: dict, pod: dict) -> str:
    """What the Job's ``podFailurePolicy`` does with its failed ``pod``: the action of the first rule it meets
    (FailJob, FailIndex, Ignore or Count; a rule of another action is skipped, as the Job controller does), else
    Count. A rule on exit codes reads the containers' (and init containers') that ended non-zero; one on pod
    conditions, a condition of that type and status (default True)."""
    status = pod.get("status") or {}
    ended = [
        (container.get("name"), ((container.get("state") or {}).get("terminated") or {}).get("exitCode"))
        for container in (*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or []))
    ]
    conditions = {(condition.get("type"), condition.get("status")) for condition in status.get("conditions") or []}
    for rule in ((job.get("spec") or {}).get("podFailurePolicy") or {}).get("rules") or []:
        if rule.get("action") not in FAILURE_ACTIONS:
            continue
        if (exits := rule.get("onExitCodes")) is not None:
            named = exits.get("containerName")
            codes = [code for name, code in ended if code and (named is None or name == named)]
            values = set(exits.get("values") or [])
            met = any((code in values) == (exits.get("operator") == "In") for code in codes)
        else:
            patterns = rule.get("onPodConditions") or []
            met = any((pattern.get("type"), pattern.get("status", "True")) in conditions for pattern in patterns)
        if met:
            return rule["action"]
    return "Count"


def live(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") not in TERMINAL


def _failed(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") == "Failed"


def _replaced_member(objects: GangObjects, bound: list[dict], unbound: list[dict]) -> bool:
    """Whether a running gang lost a member whose owner made a new pod for it: fewer pods bound than its PodGroup's
    minMember, a new one waiting, and no restart under way (none of the bound is being deleted). Left alone, the
    rest would run short of that member (its node lost, its pod deleted) while the new pod waits for them to end."""
    min_member = objects.min_member
    return (
        bool(unbound)
        and isinstance(min_member, int)
        and len(bound) < min_member
        and not any(pod["metadata"].get("deletionTimestamp") for pod in bound)
    )


def _queue_of(objects: GangObjects, namespaces: Mapping[str, dict], settings: Settings) -> tuple[str, str]:
    """The gang's queue and where it was named (for messages)."""
    key = settings.queue_key
    for source, meta in (
        ("PodGroup label", (objects.group or {}).get("metadata")),
        ("pod label", objects.pods[0]["metadata"]),
    ):
        value = ((meta or {}).get("labels") or {}).get(key)
        if value:
            return value, f"{source} {key}"
    namespace = (namespaces.get(objects.namespace) or {}).get("metadata") or {}
    for source in ("labels", "annotations"):
        value = (namespace.get(source) or {}).get(key)
        if value:
            return value, f"namespace {objects.namespace} {source[:-1]} {key}"
    return settings.default_queue, "the default queue"


def _first_annotation(objects: GangObjects, key: str) -> str | None:
    for meta in ((objects.group or {}).get("metadata"), objects.pods[0]["metadata"]):
        value = ((meta or {}).get("annotations") or {}).get(key)
        if value is not None:
            return value
    return None


def _topology_constraint(objects: GangObjects, settings: Settings) -> TopologyConstraint | None:
    names = [level.name for level in settings.topology]
    for key, required in ((TOPOLOGY_REQUIRED, True), (TOPOLOGY_PREFERRED, False)):
        level = _first_annotation(objects, key)
        if level is not None:
            if level not in names:
                raise ValueError(f"annotation {key} is {level!r}; expected one of the levels {', '.join(names)}")
            return TopologyConstraint(level, required)
    if objects.api is NATIVE:
        return _native_topology(objects.group or {}, settings)
    return None


def _native_topology(group: dict, settings: Settings) -> TopologyConstraint | None:
    """A Kubernetes PodGroup's ``schedulingConstraints.topology``: every pod in one domain of the node label it
    names, which must be a label of one of the topology's levels."""
    constraints = ((group.get("spec") or {}).get("schedulingConstraints") or {}).get("topology") or []
    if not constraints:
        return None
    if len(constraints) > 1:
        raise ValueError(f"spec.schedulingConstraints.topology has {len(constraints)} entries; expected one")
    key = constraints[0].get("key")
    for level in settings.topology:
        if key in level.labels:
            return TopologyConstraint(level.name, True)
    labels = ", ".join(label for level in settings.topology for label in level.labels)
    raise ValueError(f"spec.schedulingConstraints.topology key is {key!r}; expected a topology label: {labels}")


def _affinity(pod_spec: dict) -> tuple[NodeSelectorRequirement, ...]:
    node_affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return ()
    if len(terms) > 1:
        raise ValueError(
            "spec.affinity.nodeAffinity has several nodeSelectorTerms; expected one (the scheduler ANDs one term)"
        )
    if terms[0].get("matchFields"):
        raise ValueError("spec.affinity.nodeAffinity uses matchFields; expected matchExpressions only")
    requirements = []
    for expression in terms[0].get("matchExpressions") or []:
        if expression["operator"] not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(
                f"spec.affinity.nodeAffinity operator {expression['operator']}; expected In, NotIn, Exists or "
                "DoesNotExist"
            )
        requirements.append(
            NodeSelectorRequirement(expression["key"], expression["operator"], tuple(expression.get("values") or ()))
        )
    return tuple(requirements)


def _tolerations(pod_spec: dict) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(t.get("key") or "", t.get("operator") or "Equal", t.get("value") or "", t.get("effect") or "")
        for t in pod_spec.get("tolerations") or []
    )


def _pins(pods: list[dict], hostnames: Mapping[str, str]) -> dict[str, str]:
    """Pod name -> the node its nodeSelector on kubernetes.io/hostname names (``hostnames``: label value ->
    node name; a value no node carries is kept as the name, which the core reports as no such node)."""
    named = {pod["metadata"]["name"]: (pod["spec"].get("nodeSelector") or {}).get(HOSTNAME) for pod in pods}
    pinned = sorted(name for name, value in named.items() if value is not None)
    if pinned and len(pinned) < len(named):
        loose = sorted(set(named) - set(pinned))
        raise ValueError(
            f"pods {pinned} set nodeSelector {HOSTNAME} and {loose} do not; expected every pod of a gang "
            "pinned to its node, or none"
        )
    return {name: hostnames.get(value, value) for name, value in named.items() if value is not None}


def build_gang(
    objects: GangObjects,
    pods: list[dict],
    queue: str,
    now: float,
    settings: Settings,
    hostnames: Mapping[str, str],
    pod_rules: tuple[NodeSelectorRequirement, ...] = (),
    claim_requests: Mapping[str, Mapping[str, int]] | None = None,
    **extra,
) -> Gang:
    """The core's Gang for ``pods`` of ``objects`` (all of them, or the bound ones of a running gang). Pods
    pinned by nodeSelector kubernetes.io/hostname become members pinned to their nodes; the rest of the
    first pod's nodeSelector is the gang's, its node affinity too, with ``pod_rules`` (from pod affinity and DRA).
    ``claim_requests``: pod name -> what it asks of a node for its own ResourceClaims (``_claim_rules``)."""
    first = min(pods, key=lambda pod: pod["metadata"]["name"])
    spec = first["spec"]
    pins = _pins(pods, hostnames)
    node_selector = {key: value for key, value in (spec.get("nodeSelector") or {}).items() if key != HOSTNAME}
    group_spec = (objects.group or {}).get("spec") or {}
    schedule_timeout = None
    if group_spec.get("scheduleTimeoutSeconds"):
        schedule_timeout = float(group_spec["scheduleTimeoutSeconds"])
    elif objects.api is NATIVE and objects.annotations().get(SCHEDULE_TIMEOUT):
        try:
            schedule_timeout = runtime_seconds(objects.annotations()[SCHEDULE_TIMEOUT])
        except ValueError as error:
            raise ValueError(f"annotation {SCHEDULE_TIMEOUT} is {error}") from None
    runtimes = [pod["spec"]["activeDeadlineSeconds"] for pod in pods if pod["spec"].get("activeDeadlineSeconds")]
    annotated = _first_annotation(objects, RUNTIME)
    max_runtime = None
    if annotated is not None:
        try:
            max_runtime = runtime_seconds(annotated)
        except ValueError as error:
            raise ValueError(f"annotation {RUNTIME} is {error}") from None
    elif runtimes:
        max_runtime = float(min(runtimes))
    min_resources = None
    if group_spec.get("minResources"):
        min_resources = resource_map(group_spec["minResources"], "spec.minResources")
    owner_meta = objects.owner["metadata"]
    backoff = Backoff.decode(objects.annotations())
    owner_max_restarts, owner_limit_reason = objects.owner_limit(backoff.restarts)
    claimed = claim_requests or {}
    return Gang(
        name=objects.name,
        queue=queue,
        members=tuple(
            Member(
                pod["metadata"]["name"],
                {**pod_requests(pod), **claimed.get(pod["metadata"]["name"], {})},
                pins.get(pod["metadata"]["name"]),
            )
            for pod in sorted(pods, key=_member_order)
        ),
        priority=max(int(pod["spec"].get("priority") or 0) for pod in pods),
        submit_time=timestamp(owner_meta.get("creationTimestamp"), now),
        max_runtime=max_runtime,
        schedule_timeout=schedule_timeout,
        topology=_topology_constraint(objects, settings),
        node_selector=node_selector,
        affinity=_affinity(spec) + pod_rules,
        tolerations=_tolerations(spec),
        min_resources=min_resources,
        restart_count=backoff.restarts,
        not_before=backoff.not_before,
        owner_max_restarts=owner_max_restarts,
        owner_limit_reason=owner_limit_reason,
        **extra,
    )


@dataclass(frozen=True)
class _Added:
    """What translating one gang added to a ``Translation``."""

    pending: tuple[Gang, ...]
    running: tuple[RunningGang, ...]
    waiting: tuple[tuple[str, Waiting], ...]
    problems: tuple[Problem, ...]
    queue: str

    def into(self, out: Translation, objects: GangObjects) -> None:
        out.pending.extend(self.pending)
        out.running.extend(self.running)
        out.waiting.update(self.waiting)
        out.problems.extend(self.problems)
        objects.queue = self.queue


class TranslationCache:
    """What one pass built for a node or a gang, reused in the next while everything it was built from is the same:
    the same objects (the informers replace an object on every change they keep, and only move the resourceVersion
    of one whose change they trim away; the overlays make new ones) and equal values (a gang's pins, queue and
    rules; a node's use by other pods). Rebuilding every gang's Gang and every node's Node was most of a pass over a
    thousand nodes and thousands of gangs. Entries the last pass did not use are dropped as the next begins
    (``begin``)."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], tuple[tuple, tuple, Any]] = {}  # (kind, name) -> (objects, values, built)
        self._now: dict[tuple[str, str], tuple[tuple, tuple, Any]] = {}

    def begin(self) -> None:
        """Start a pass: what the last one built is what this one may reuse."""
        self._last, self._now = self._now, {}

    def _reuse(self, key: tuple[str, str], sources: tuple, values: tuple, make: Callable[[], T]) -> T:
        """What ``make`` returned last pass for ``key`` if built from the same ``sources`` (by identity) and equal
        ``values``; else ``make()``."""
        kept = self._kept(key, sources, values)
        built = kept if kept is not None else make()
        self._now[key] = (sources, values, built)  # the sources are kept alive, so their ids stay theirs
        return built

    def _kept(self, key: tuple[str, str], sources: tuple, values: tuple) -> Any:
        """What the last pass built for ``key`` from the same ``sources`` and equal ``values``; None: nothing."""
        kept = self._last.get(key)
        if (
            kept is not None
            and len(kept[0]) == len(sources)
            and all(a is b for a, b in zip(kept[0], sources, strict=True))
            and kept[1] == values
        ):
            return kept[2]
        return None

    def stable(self, name: str, value: T) -> T:
        """The last pass's ``value`` of ``name`` while equal to this one: one object, so it can be a source."""
        kept = self._last.get(("Value", name))
        if kept is not None and kept[2] == value:
            value = kept[2]
        self._now[("Value", name)] = ((), (), value)
        return value

    def outcome(
        self, objects: GangObjects, sources: tuple, values: tuple, out: Translation, add: Callable[[Translation], None]
    ) -> None:
        """``add(out)`` for a gang whose whole translation is made of ``sources`` and ``values``
        (``_outcome_sources``): what it added last pass (its pending or running gang, why it waits, its problems,
        its queue) added again while they are the same."""
        key = ("Outcome", objects.name)
        added = self._kept(key, sources, values)
        if added is None:
            scratch = Translation(nodes=out.nodes, devices=out.devices)
            add(scratch)
            out.partial.extend(scratch.partial)  # settled before the core runs: its objects are this pass's
            added = _Added(
                tuple(scratch.pending),
                tuple(scratch.running),
                tuple(scratch.waiting.items()),
                tuple(scratch.problems),
                objects.queue,
            )
            if scratch.partial:
                added.into(out, objects)
                return
        self._now[key] = (sources, values, added)
        added.into(out, objects)

    def node(self, obj: dict, levels: tuple[TopologyLevel, ...], used: Mapping[str, int]) -> Node:
        """``to_node(obj, levels, used)``, reused."""
        name = obj["metadata"]["name"]
        return self._reuse(("Node", name), (obj, levels), (used,), lambda: to_node(obj, levels, used))

    def gang(
        self,
        objects: GangObjects,
        pods: list[dict],
        queue: str,
        now: float,
        settings: Settings,
        hostnames: Mapping[str, str],
        **extra,
    ) -> Gang:
        """``build_gang(objects, pods, queue, now, settings, hostnames, **extra)``, reused."""

        def make() -> Gang:
            return build_gang(objects, pods, queue, now, settings, hostnames, **extra)

        if "creationTimestamp" not in objects.owner["metadata"]:  # its submit time is ``now``: built anew each pass
            return make()
        try:
            values = (queue, _pins(pods, hostnames), extra)
        except ValueError:
            return make()  # raises it, as building would
        sources = (settings, objects.api, objects.group, *objects.pods, None, *pods, None, *_owned_jobs(objects))
        return self._reuse(("Gang", objects.name), sources, values, make)


def _owned_jobs(objects: GangObjects) -> list[dict]:
    """The Jobs controlling the gang's pods, as often as they control one."""
    return [
        objects.jobs[ref["uid"]]
        for pod in objects.pods
        for ref in pod["metadata"].get("ownerReferences") or []
        if ref.get("controller") and ref.get("uid") in objects.jobs
    ]


def _not_bindable(pod: dict) -> tuple[str, str] | None:
    """Why the scheduler must not bind ``pod`` (a reason code and the words), or None: a pod still gated, or one
    needing what this scheduler does not read (1.35's gang API)."""
    spec = pod["spec"]
    gates = [gate.get("name", "") for gate in spec.get("schedulingGates") or []]
    if gates:
        return "gang.gated", f"has spec.schedulingGates {', '.join(gates)}; it waits until they are removed"
    if spec.get("workloadRef"):  # Kubernetes 1.35's field, replaced by spec.schedulingGroup in 1.36
        return (
            "input.unsupported",
            "sets spec.workloadRef (Kubernetes 1.35's gang API), which this scheduler does not read",
        )
    return None


def _member_order(pod: dict) -> tuple:
    """Largest pods first, then by name: the core takes the first ``min_member`` members as the required ones."""
    requests = pod_requests(pod)
    return (-requests.get("nvidia.com/gpu", 0), pod["metadata"]["name"])


def translate(
    nodes: Iterable[dict],
    pods: Iterable[dict],
    foreign_pods: Iterable[dict],
    groups: Mapping[tuple[GangApi, str, str], dict],
    queues: Iterable[dict],
    namespaces: Mapping[str, dict],
    settings: Settings,
    now: float,
    jobs: Iterable[dict] = (),
    devices: dra.Devices | None = None,
    cache: TranslationCache | None = None,
) -> Translation:
    """Everything the core needs from the cluster's objects, with the problems found on the way.

    ``pods``: the live pods whose schedulerName is ours; ``foreign_pods``: other bound pods, whose requests are
    taken off their nodes' allocatable; ``jobs``: the Jobs, whose limits bound the restarts of gangs they own;
    ``devices``: DRA's devices and claims (None: the API is not served); ``cache``: the Nodes and Gangs of the last
    pass (``TranslationCache``; None: build every one)."""
    out = Translation(devices=devices)
    cache = cache or TranslationCache()
    cache.begin()
    used: dict[str, dict[str, int]] = {}
    for pod in foreign_pods:
        node = pod["spec"].get("nodeName")
        if node and live(pod):
            try:
                for name, amount in pod_requests(pod).items():
                    used.setdefault(node, {})[name] = used.get(node, {}).get(name, 0) + amount
            except ValueError:
                continue  # the API server validated it; a foreign pod is not ours to report on
    ready_nodes = set()
    unselected = set()
    for obj in nodes:
        if not settings.selects(obj["metadata"].get("labels") or {}):
            unselected.add(obj["metadata"]["name"])
            continue
        try:
            node = cache.node(obj, settings.topology, used.get(obj["metadata"]["name"], {}))
        except ValueError as error:
            out.problems.append(Problem("Node", None, obj["metadata"]["name"], str(error)))
            continue
        out.nodes.append(node)
        if node.ready:
            ready_nodes.add(node.name)
        quarantined = Quarantine.decode(obj["metadata"].get("annotations") or {})
        if quarantined is not None:
            out.quarantined[node.name] = quarantined
    out.queues, queue_problems = queues_from(queues, settings.default_queue)
    out.problems.extend(queue_problems)
    queue_names = cache.stable("queue names", frozenset(queue.name for queue in out.queues))

    grouped: dict[str, GangObjects] = {}
    succeeded = set()
    job_by_uid = {job["metadata"]["uid"]: job for job in jobs}
    for pod in pods:
        name = gang_of(pod)
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            succeeded.add(name)
        if not live(pod) and not (_failed(pod) and pod["spec"].get("nodeName")):
            continue  # a bound pod that failed stays: it is a failed member of its gang
        namespace = pod["metadata"]["namespace"]
        if name not in grouped:
            api, group_name = joined(pod) or (None, "")
            group = groups.get((api, namespace, group_name)) if api is not None else None
            grouped[name] = GangObjects(name, namespace, api, group, [], jobs=job_by_uid)
        grouped[name].pods.append(pod)
    for name, objects in list(grouped.items()):
        if any(pod["spec"].get("nodeName") in unselected for pod in objects.pods):
            del grouped[name]  # running on nodes this scheduler does not use: not its to count or restart
        else:
            objects.ending = name in succeeded
    out.gangs = grouped
    hostnames = {node.labels[HOSTNAME]: node.name for node in out.nodes if HOSTNAME in node.labels}
    bound = [pod for pod in (*pods, *foreign_pods) if pod["spec"].get("nodeName") and live(pod)]
    neighbours = Neighbours(bound, {node.name: node.labels for node in out.nodes})
    for name in sorted(grouped):
        objects = grouped[name]

        def add(sink: Translation, objects: GangObjects = objects) -> None:
            _add_gang(sink, objects, queue_names, ready_nodes, namespaces, settings, now, hostnames, neighbours, cache)

        made_of = _outcome_sources(objects, namespaces, settings, queue_names, ready_nodes, neighbours)
        if made_of is None:
            add(out)
        else:
            cache.outcome(objects, *made_of, out, add)
    if out.claim_slots:
        out.nodes = [
            dataclasses.replace(node, allocatable={**node.allocatable, **out.claim_slots[node.name]})
            if node.name in out.claim_slots
            else node
            for node in out.nodes
        ]
    return out


class Neighbours:
    """The bound pods and the nodes' labels that pod affinity reads; the pods are read for it only once a pending
    gang needs them."""

    def __init__(self, bound: list[dict], node_labels: dict[str, Mapping[str, str]]):
        self._pods = bound
        self.node_labels = node_labels
        # some bound pod has a required anti-affinity: every pending gang must be read against it
        self.guarded = any(podaffinity.required_anti_affinity(pod) for pod in bound)

    @cached_property
    def bound(self) -> list[tuple[str, podaffinity.BoundPod]]:
        """Each bound pod with its gang."""
        return [(gang_of(pod), podaffinity.bound_pod(pod)) for pod in self._pods]

    def rules(self, gang: str, pods: list[dict]) -> dict:
        """``build_gang`` arguments for the pod affinity of a pending gang's ``pods`` (none when they name no pod
        and no bound pod's anti-affinity names pods); raises ``podaffinity.AffinityError``."""
        if not self.guarded and not any(podaffinity.asks(pod) for pod in pods):
            return {}
        others = [other for name, other in self.bound if name != gang]
        return podaffinity.gang_rules(pods, others, self.node_labels)


def _outcome_sources(
    objects: GangObjects,
    namespaces: Mapping[str, dict],
    settings: Settings,
    queue_names: frozenset[str],
    ready_nodes: set[str],
    neighbours: Neighbours,
) -> tuple[tuple, tuple] | None:
    """What ``_add_gang`` makes of the gang from (sources, by identity; values, by equality), or None when it also
    reads what these do not hold: other gangs' pods (pod affinity), ResourceClaims, the nodes beyond the readiness
    of its own (pins, avoided nodes) or the time (an ending gang, no creation time, a start never written)."""
    owner = objects.owner["metadata"]
    if neighbours.guarded or objects.ending or "creationTimestamp" not in owner:
        return None
    if AVOID in (owner.get("annotations") or {}):
        return None
    ready = []
    for pod in objects.pods:
        spec = pod["spec"]
        if spec.get("resourceClaims") or HOSTNAME in (spec.get("nodeSelector") or {}) or podaffinity.asks(pod):
            return None
        if spec.get("nodeName"):
            if STARTED_AT not in (pod["metadata"].get("annotations") or {}):
                return None
            ready.append(spec["nodeName"] in ready_nodes)
    sources = (settings, objects.api, objects.group, namespaces.get(objects.namespace), queue_names, *objects.pods)
    return (*sources, None, *_owned_jobs(objects)), tuple(ready)


def _add_gang(
    out: Translation,
    objects: GangObjects,
    queue_names: frozenset[str],
    ready_nodes: set[str],
    namespaces: Mapping[str, dict],
    settings: Settings,
    now: float,
    hostnames: Mapping[str, str],
    neighbours: Neighbours,
    cache: TranslationCache,
) -> None:
    group_name = objects.api.member_of(objects.pods[0]) if objects.api is not None else None
    bound = [pod for pod in objects.pods if pod["spec"].get("nodeName")]
    unbound = [pod for pod in objects.pods if not pod["spec"].get("nodeName")]
    if objects.annotations().get(FAILED):
        bound = [pod for pod in bound if live(pod)]  # the ended pods its failure kept: evidence, no longer members
    if not unbound and not any(live(pod) for pod in bound):
        return  # every pod has ended: the gang is over, its failures are its owner's to handle
    queue, named_by = _queue_of(objects, namespaces, settings)
    objects.queue = queue

    def refuse(code: str, message: str) -> None:
        out.waiting[objects.name] = Waiting(code, message)
        out.problems.append(Problem(objects.kind, objects.namespace, objects.owner_name, message))

    if bound:
        planned = objects.planned()
        if unbound and any(pod["metadata"]["uid"] in planned for pod in unbound):
            out.partial.append(objects)  # the adapter completes or releases it before the core runs
            return
        try:
            known = queue if queue in queue_names else settings.default_queue
            gang = cache.gang(objects, bound, known, now, settings, hostnames)
        except ValueError as error:
            gang = Gang(objects.name, settings.default_queue, tuple(Member(p["metadata"]["name"], {}) for p in bound))
            out.problems.append(Problem(objects.kind, objects.namespace, objects.owner_name, str(error)))
        annotations = bound[0]["metadata"].get("annotations") or {}
        start = Start.decode(annotations, now)
        failed = tuple(
            sorted(
                pod["metadata"]["name"]
                for pod in bound
                # a pod being deleted has been dealt with (a restart deletes every pod): not a new failure
                if not pod["metadata"].get("deletionTimestamp")
                and (pod["spec"]["nodeName"] not in ready_nodes or _failed(pod))
            )
        )
        if _replaced_member(objects, bound, unbound):
            failed = tuple(sorted({*failed, *(pod["metadata"]["name"] for pod in unbound)}))
        out.running.append(
            host.started(
                gang,
                {pod["metadata"]["name"]: pod["spec"]["nodeName"] for pod in bound},
                start.at,
                borrowed=start.borrowed,
                backfilled_past=start.backfilled_past,
                failed_members=failed,
                ending_at=now if objects.ending else None,
            )
        )
        if unbound:
            out.waiting[objects.name] = Waiting(
                "gang.running", "the gang is running; pods added after it started wait for it to end"
            )
        return
    if objects.annotations().get(FAILED):
        out.waiting[objects.name] = Waiting("gang.failed", f"the gang failed: {objects.annotations()[FAILED]}")
        return
    if out.devices is not None:
        out.protecting.update(dra.unprotected(out.devices, objects.namespace, unbound))
    if objects.api is not None and objects.group is None:
        refuse(
            "input.podgroup-missing",
            f"{objects.api.joined_by} names {objects.api.kind} {group_name!r}, which does not exist in "
            f"{objects.namespace}" + (" (or its API is not served)" if objects.api is NATIVE else ""),
        )
        return
    if queue not in queue_names:
        refuse("input.unknown-queue", f"{named_by} names queue {queue!r}, which does not exist or is not usable")
        return
    min_member = objects.min_member
    if objects.api is not None and min_member is not None and min_member > len(unbound):
        refuse(
            "input.min-member",
            # the same words while the pods come one by one: one Event, one status write, not one per pod
            f"{objects.api.min_field} is {min_member} but fewer pods carry "
            f"{objects.api.member_key}={objects.owner_name}; expected at least {min_member} (waiting for the rest)",
        )
        return
    if objects.api is NATIVE and ((objects.group or {}).get("spec") or {}).get("resourceClaims"):
        refuse("input.unsupported", "spec.resourceClaims is set, which this scheduler does not allocate")
        return
    for pod in unbound:
        why = _not_bindable(pod)
        if why is None:
            continue
        message = f"pod {pod['metadata']['name']} {why[1]}; the gang waits whole"
        if why[0] == "gang.gated":
            out.waiting[objects.name] = Waiting(why[0], message)
        else:
            refuse(why[0], message)
        return
    try:
        rules = neighbours.rules(objects.name, unbound)
    except podaffinity.AffinityError as error:
        if error.code == "gang.affinity":
            out.waiting[objects.name] = Waiting(error.code, str(error))
        else:
            refuse(error.code, str(error))
        return
    if any(pod["spec"].get("resourceClaims") for pod in unbound):
        try:
            claim_rules = _claim_rules(out, objects, unbound)
        except dra.ClaimError as error:
            if error.code.startswith("input.") or error.code in ("dra.selector-error", "dra.class-missing"):
                refuse(error.code, str(error))
            else:
                out.waiting[objects.name] = Waiting(error.code, str(error))
            return
        rules = {**rules, "pod_rules": (*rules.get("pod_rules", ()), *claim_rules.pop("pod_rules")), **claim_rules}
    avoided = _avoided(objects, unbound, out.nodes, now, rules.get("spreads", ()))
    if avoided is not None:
        out.avoiding[objects.name], keep_off_hosts = avoided
        keep_off = NodeSelectorRequirement(HOSTNAME, "NotIn", keep_off_hosts)
        rules = {**rules, "pod_rules": (*rules.get("pod_rules", ()), keep_off)}
    try:
        gang = cache.gang(objects, unbound, queue, now, settings, hostnames, min_member=min_member, **rules)
    except (ValueError, KeyError) as error:
        refuse("input.invalid", str(error))
        return
    out.pending.append(gang)


def _claim_rules(out: Translation, objects: GangObjects, pods: list[dict]) -> dict:
    """``build_gang`` arguments for the ResourceClaims of a pending gang's ``pods``: the room for each pod's own
    claims on each node (``claim_slots``: one resource per kind of pod, its amount per node in ``out.claim_slots``)
    and, for claims its pods share or that were allocated before, the nodes that can use them (a hostname rule).
    Raises ClaimError: a claim not covered, not made yet (code ``dra.claim-pending``), or that no node can allocate
    (``dra.unallocatable``, naming the claim and the shortfall)."""
    devices = out.devices
    if devices is None:
        served = f"{dra.GROUP}/{dra.VERSION}"
        raise dra.ClaimError(
            "dra.claim-pending", f"its pods use spec.resourceClaims; the API server does not serve {served}"
        )
    claims = dra.GangClaims()
    users: dict[tuple[str, str], list[str]] = {}
    found: dict[tuple[str, str], dra.Claim] = {}
    for pod in pods:
        name = pod["metadata"]["name"]
        for entry, claim_name in dra.claim_names(pod):
            claim = devices.claim(objects.namespace, claim_name) if claim_name else None
            if claim is None:
                what = f"ResourceClaim {objects.namespace}/{claim_name}" if claim_name else "the ResourceClaim"
                raise dra.ClaimError(
                    "dra.claim-pending", f"pod {name} waits for {what} of its spec.resourceClaims entry {entry}"
                )
            if claim.obj["metadata"].get("deletionTimestamp"):
                raise dra.ClaimError("dra.claim-pending", f"pod {name} uses {claim.label}, which is being deleted")
            claims.by_pod.setdefault(name, []).append(claim)
            users.setdefault((claim.namespace, claim.name), []).append(name)
            found[(claim.namespace, claim.name)] = claim
    uids = {pod["metadata"]["uid"] for pod in pods}
    stale = [c for c in found.values() if c.allocation is not None and c.reserved_for and c.reserved_for <= uids]
    if stale:  # allocated for these pods by a pass that did not bind them: released first (an allocation is fixed)
        out.releasing.extend(stale)
        raise dra.ClaimError("dra.releasing", f"{stale[0].label} was allocated by an interrupted pass; released first")
    for key, claim in found.items():
        if len(users[key]) + len(claim.reserved_for) > dra.MAX_RESERVED:
            raise dra.ClaimError(
                "input.unsupported", f"{claim.label} is used by more pods than the API lets one claim serve (256)"
            )
        if claim.allocation is not None or len(users[key]) > 1:
            claims.shared.add(key)
    taken = devices.allocated
    ready = [node.name for node in out.nodes if node.ready and node.schedulable]
    for name in claims.by_pod:
        own = claims.own(name)
        slot = claims.slot_name(name)
        if slot is None:
            continue
        # room for its own claims as a whole, and for their devices class by class: pods asking differently of one
        # class share its count
        claims.extra[name] = {slot: 1, **{f"devices/{cls}": n for cls, n in dra.class_counts(own).items()}}
        if slot not in devices.tables:  # once a pass for each kind of pod, whichever gangs have it
            rooms = devices.rooms_of(slot, own, claims.extra[name], ready)
            for node, room in rooms.items():
                out.claim_slots.setdefault(node, {}).update(room)
        if not devices.tables[slot]:
            where = ready[0] if ready else None
            short = _own_shortfall(own, devices.reachable(where), taken) if where else "no ready node"
            raise dra.ClaimError("dra.unallocatable", f"no node can allocate pod {name}'s ResourceClaims ({short})")
    allowed = set(ready)
    for key in sorted(claims.shared):
        claim = found[key]
        if claim.allocation is None:
            fit = {node for node in allowed if dra.allocate(claim, devices.reachable(node), taken) is not None}
        else:
            fit = {node for node in allowed if dra.on_node(claim, node)}
        if not fit:
            where = sorted(allowed)[0] if allowed else None
            short = dra.shortfall(claim, devices.reachable(where), taken) if where else "no ready node"
            if claim.allocation is not None:
                short = "allocated on nodes the gang cannot use"
            raise dra.ClaimError("dra.unallocatable", f"no node can allocate {claim.label} ({short})")
        allowed = fit
    out.claims[objects.name] = claims
    rules: dict = {"claim_requests": claims.extra, "pod_rules": ()}
    for key in sorted(claims.shared):
        claim = found[key]
        if claim.allocation is None and dra.allocate(claim, devices.everywhere(), taken) is None:
            # a claim of node-local devices several pods share: they are on its node, and so the gang (Together's)
            rules["together"] = Together(HOSTNAME, f"{claim.label}, shared by several pods, of node-local devices")
            break
    if claims.shared and allowed != set(ready):
        hostnames = {node.name: node.labels.get(HOSTNAME) for node in out.nodes}
        rules["pod_rules"] = (
            NodeSelectorRequirement(HOSTNAME, "In", tuple(sorted(filter(None, (hostnames[n] for n in allowed))))),
        )
    return rules


def _own_shortfall(claims: list[dra.Claim], reachable: list[dra.Device], taken: set) -> str:
    """Why a pod's own ``claims`` do not fit a node: the first that cannot be allocated alone, with its shortfall."""
    for claim in claims:
        if dra.allocate(claim, reachable, taken) is None:
            return f"{claim.label}: {dra.shortfall(claim, reachable, taken)}"
    return "its ResourceClaims cannot all be allocated together"


def _avoided(
    objects: GangObjects, pods: list[dict], nodes: list[Node], now: float, spreads: tuple[Spread, ...] = ()
) -> tuple[Avoid, tuple[str, ...]] | None:
    """The failed nodes the gang keeps off while its owner's ``railforge.io/avoid-nodes`` lasts, and their hostname
    labels, when the other ready nodes could ever hold it: each pod on one of them (its requests, its nodeSelector,
    its taints tolerated), all of its requests together, and as many of them as its pods kept apart (``spreads``)
    need; else None: it falls back to them rather than never start."""
    avoid = Avoid.decode(objects.annotations())
    if avoid is None or avoid.until <= now:
        return None
    failed = [node for node in nodes if node.name in avoid.nodes and HOSTNAME in node.labels]
    hosts = tuple(sorted(node.labels[HOSTNAME] for node in failed))
    others = [node for node in nodes if node.ready and node.schedulable and node.name not in avoid.nodes]
    holders: set[str] = set()  # the other nodes that could hold one of its pods
    needs: dict[str, int] = {}
    for pod in pods:
        requests = pod_requests(pod)
        add_amounts(needs, requests)
        selector = pod["spec"].get("nodeSelector") or {}
        tolerations = _tolerations(pod["spec"])
        could = {
            node.name
            for node in others
            if all(node.allocatable.get(name, 0) >= amount for name, amount in requests.items())
            and all(node.labels.get(key) == value for key, value in selector.items())
            and all(
                any(toleration.tolerates(taint) for toleration in tolerations)
                for taint in node.taints
                if taint.effect in ("NoSchedule", "NoExecute")
            )
        }
        if not could:
            return None
        holders |= could
    kept = [node for node in others if node.name in holders]
    if not hosts or any(sum(node.allocatable.get(name, 0) for node in kept) < need for name, need in needs.items()):
        return None
    for spread in spreads:
        room = spread.room_on(kept)
        if spread.required and room is not None and len(spread.members) > room:
            return None
    return avoid, hosts
