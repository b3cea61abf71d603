"""The scheduler's write side: every change it makes to the cluster, behind the one seam the loop calls (``act``,
``settle``) and a test can replace with a fake.

Binds, evictions and deletions, the placement plan and the gang's annotations on its owner, and the assume cache:
what this process wrote that the informers have not shown yet, laid over what they show (``overlay_pods``,
``overlay_owner``), so the next pass neither decides a restart twice nor loses its backoff.

Fencing: every API write first asks ``fence()`` (the leader's own renewal still within its renew deadline, the
moment the Lease's renewTime records). A replica stopped past its deadline and then continued writes nothing
more, even in the middle of a gang: its standby may already hold the Lease. The one write that can pass the fence
and land late, a Binding sent after a stop between check and request, names the pod's resourceVersion; a release
writes every unbound member first, so the API server refuses it.

Crash safety: before binding a gang of several pods the placement (pod uid -> node) is written on its owner. A
run that finds a gang partly bound completes it on that placement when every unbound pod still fits its planned
node and every bind succeeds, and otherwise releases it: it deletes the bound pods, so the gang's owner
recreates them and the gang is scheduled again whole. A Binding names the pod's uid, so no pod is ever bound
twice or bound in a recreated copy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from kubernetes.client import ApiException

import railforge.scheduler as core
from railforge.k8s import dra, evidence, podaffinity, rest
from railforge.k8s.annotations import (
    AVOID,
    FAILED,
    LAST_FAILURE,
    PLACEMENT,
    Avoid,
    Backoff,
    Start,
    encode_placement,
)
from railforge.k8s.events import Reporter, pod_scheduled_patch
from railforge.k8s.metrics import SchedulerMetrics
from railforge.k8s.translate import (
    GangObjects,
    Translation,
    Waiting,
    add_amounts,
    live,
    pod_requests,
)
from railforge.k8s.views import SchedulerState
from railforge.scheduler import host

log = logging.getLogger(__name__)

# kind of removal -> (what the decision log says, counter, Event reason)
REMOVALS = {
    "evict": ("evicted ({cause})", "evictions", "Evicted"),
    "restart": ("restarted", "restarts", "Restarted"),
    "fail": ("failed", "failures", "Failed"),
    "release": ("released", "releases", "Released"),
}
PDBS = "/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
REFUSAL_SECONDS = 30.0  # how long a reclaim that a budget refused waits before the budgets are read again
# what a pod this process deleted carries until the informer shows the API server's own deletionTimestamp
DELETING = "deleted-by-this-scheduler"
PROTECT_PER_PASS = 128  # claims given the delete protection ahead of their allocation in one pass, at most


class Budgets:
    """The PodDisruptionBudgets of the namespaces one pass evicts from, read once each, and what its evictions
    have used of them so far."""

    def __init__(self, read: Callable[[str], dict]):
        self.read = read
        self.left: dict[str, dict[str, int]] = {}  # namespace -> budget name -> disruptions still allowed
        self.selectors: dict[str, dict[str, dict | None]] = {}

    def refuse(self, namespace: str, pods: list[dict]) -> str | None:
        """Why evicting ``pods`` together would break a budget (its name, what it allows, what they take), or None;
        when None, they are counted as evicted."""
        if namespace not in self.left:
            items = self.read(namespace).get("items") or []
            self.left[namespace], self.selectors[namespace] = {}, {}
            for pdb in items:
                name, status = pdb["metadata"]["name"], pdb.get("status") or {}
                current = status.get("observedGeneration", 0) >= pdb["metadata"].get("generation", 0)
                self.left[namespace][name] = status.get("disruptionsAllowed", 0) if current else 0
                self.selectors[namespace][name] = (pdb.get("spec") or {}).get("selector")
        taken = {
            name: sum(_selects(selector, pod["metadata"].get("labels") or {}) for pod in pods)
            for name, selector in self.selectors[namespace].items()
        }
        for name, count in sorted(taken.items()):
            if count > self.left[namespace][name]:
                allowed = self.left[namespace][name]
                return (
                    f"would take {count} pods that PodDisruptionBudget {namespace}/{name} covers; it allows "
                    f"{allowed} disruption{'s' if allowed != 1 else ''} now"
                )
        for name, count in taken.items():
            self.left[namespace][name] -= count
        return None


def _claim_key(obj: dict) -> tuple[str, str]:
    return obj["metadata"]["namespace"], obj["metadata"]["name"]


def _selects(selector: dict | None, labels: dict[str, str]) -> bool:
    """A label selector's verdict on ``labels`` (policy/v1: an empty selector selects every pod, none selects none)."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    return all(
        core.NodeSelectorRequirement(e["key"], e["operator"], tuple(e.get("values") or ())).matches(labels)
        for e in selector.get("matchExpressions") or []
    )


class NotLeading(Exception):
    """A write refused by the fence: this replica's leadership is not current."""


class WriteSide:
    def __init__(
        self,
        api,
        pool: ThreadPoolExecutor,
        fence: Callable[[], bool],
        eviction_grace_seconds: int | None,
        avoid_seconds: float,
        state: SchedulerState,
        metrics: SchedulerMetrics,
        reporter: Reporter,
        wake: Callable[[], None],
    ):
        self.api = api
        self.pool = pool
        self.fence = fence
        self.grace = eviction_grace_seconds
        self.avoid_seconds = avoid_seconds
        self.state = state
        self.metrics = metrics
        self.reporter = reporter
        self.wake = wake  # asks the loop for another pass
        # pod uid -> (node, annotations): bound by this process, not yet seen bound in the cache
        self.assumed: dict[str, tuple[str, dict[str, str]]] = {}
        self.deleted: set[str] = set()  # pod uids this process deleted or evicted
        self.patched: dict[str, dict[str, str | None]] = {}  # owner uid -> annotations written, not yet seen
        self.refused: dict[str, tuple[float, Waiting]] = {}  # gang -> (monotonic time to look again, why)
        # ResourceClaim (namespace, name) -> (its resourceVersions before this process wrote it, as written)
        self.claimed: dict[tuple[str, str], tuple[set[str], dict]] = {}
        self.unprotectable: dict[tuple[str, str], str] = {}  # claim -> the resourceVersion its protection failed on

    # -- the assume cache ----------------------------------------------------------------------------------------
    def overlay_pods(self, cached: list[dict]) -> list[dict]:
        """The informer's pods as this process left them: its binds placed, its deletions under way, its owner
        annotations written; a pod deleted before it was bound is gone."""
        pods = []
        for pod in cached:
            uid = pod["metadata"]["uid"]
            if pod["spec"].get("nodeName"):
                self.assumed.pop(uid, None)
            elif uid in self.assumed:
                node, annotations = self.assumed[uid]
                meta = dict(pod["metadata"], annotations={**(pod["metadata"].get("annotations") or {}), **annotations})
                pod = dict(pod, metadata=meta, spec=dict(pod["spec"], nodeName=node))
            if uid in self.deleted:
                if not pod["spec"].get("nodeName"):
                    continue
                if not pod["metadata"].get("deletionTimestamp"):
                    pod = dict(pod, metadata=dict(pod["metadata"], deletionTimestamp=DELETING))
            pods.append(self.overlay_owner(pod))
        live_uids = {pod["metadata"]["uid"] for pod in cached}
        self.deleted &= live_uids
        for uid in [uid for uid in self.assumed if uid not in live_uids]:
            del self.assumed[uid]
        return pods

    def overlay_claims(self, cached: list[dict]) -> list[dict]:
        """The informer's ResourceClaims with the allocations and reservations this process wrote that it does
        not show yet."""
        claims = []
        for obj in cached:
            latest = self._latest_claim(obj)
            if latest is obj:
                self.claimed.pop(_claim_key(obj), None)
            claims.append(latest)
        return claims

    def _latest_claim(self, obj: dict) -> dict:
        """The claim as this process last wrote it, when ``obj`` is a version from before that write."""
        written = self.claimed.get(_claim_key(obj))
        return written[1] if written is not None and obj["metadata"].get("resourceVersion") in written[0] else obj

    def overlay_owner(self, obj: dict) -> dict:
        """A gang's owner (PodGroup or lone pod) with the annotations this process wrote on it; forgotten once the
        informer shows them."""
        meta = obj["metadata"]
        written = self.patched.get(meta["uid"])
        if written is None:
            return obj
        current = meta.get("annotations") or {}
        if all(current.get(key) == value for key, value in written.items()):
            del self.patched[meta["uid"]]
            return obj
        annotations = {**current, **written}
        return dict(obj, metadata=dict(meta, annotations={k: v for k, v in annotations.items() if v is not None}))

    # -- fenced writes -------------------------------------------------------------------------------------------
    def _call(self, method: str, path: str, **kwargs) -> dict:
        if not self.fence():
            self.state.count("fenced_writes")
            raise NotLeading(f"{method} {path}")
        return rest.call(self.api, method, path, **kwargs)

    def patch_owner(self, objects: GangObjects, annotations: dict[str, str | None]) -> None:
        meta = objects.owner["metadata"]
        if objects.group is not None and objects.api is not None:
            path = objects.api.path(objects.namespace, meta["name"])
        else:
            path = f"/api/v1/namespaces/{objects.namespace}/pods/{meta['name']}"
        body = {"metadata": {"annotations": annotations}}
        self._call("PATCH", path, body=body, content_type=rest.MERGE_PATCH)
        self.patched[meta["uid"]] = {**self.patched.get(meta["uid"], {}), **annotations}

    def write_plan(self, objects: GangObjects, bind: core.Bind) -> bool:
        """Write the gang's placement on its owner before binding (what a restart completes)."""
        by_name = {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in objects.pods}
        plan = {by_name[member]: node for member, node in bind.placement.items()}  # encode_placement sorts
        try:
            self.patch_owner(objects, {PLACEMENT: encode_placement(plan)})
        except ApiException as error:
            log.warning("%s: could not write its placement, not binding it: %s", bind.gang_name, rest.api_error(error))
            return False
        except NotLeading:
            return False
        return True

    def bind(self, pod: dict, node: str, annotations: dict[str, str]) -> bool:
        """Bind ``pod`` as this process last saw it: the Binding names its uid and resourceVersion, so a replica
        that passed the fence, stopped, and continued after its standby released the gang (which writes every
        unbound member, ``_fence_unbound``) is refused by the API server. A conflict while the fence still holds is
        this process's own status write since: bind once more on the pod as it is now."""
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        binding = {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],  # never a recreated pod of the same name
            "resourceVersion": meta.get("resourceVersion"),
            "annotations": annotations,  # the API server copies them onto the pod
        }
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": binding, "target": {"kind": "Node", "name": node}}
        try:
            try:
                self._call("POST", path + "/binding", body=body)
            except ApiException as error:
                if error.status != 409:
                    raise
                current = rest.call(self.api, "GET", path)  # a read: the bind that may follow asks the fence
                if current["metadata"]["uid"] != meta["uid"] or current["spec"].get("nodeName"):
                    raise
                binding["resourceVersion"] = current["metadata"]["resourceVersion"]
                self._call("POST", path + "/binding", body=body)
        except ApiException as error:
            log.warning("bind %s/%s -> %s: %s", meta["namespace"], meta["name"], node, rest.api_error(error))
            self.state.count("bind_errors")
            return False
        except NotLeading:
            return False
        self.assumed[meta["uid"]] = (node, annotations)
        self.reporter.pod_scheduled(pod)  # after any PodScheduled=False still queued for it
        return True

    def allocate_claims(self, bind: core.Bind, view: Translation, taken: set) -> Waiting | None:
        """Allocate and reserve the ResourceClaims of a gang the core placed, on the nodes it placed each pod (the
        devices go into ``taken``), before any pod is bound; why the gang is not bound when they cannot be."""
        claims = view.claims.get(bind.gang_name)
        if claims is None or view.devices is None:
            return None
        pods = {pod["metadata"]["name"]: pod for pod in view.gangs[bind.gang_name].pods}
        statuses, why = dra.allocate_gang(view.devices, claims, pods, bind.placement, taken)
        if why is not None:
            return Waiting("dra.unallocatable", f"its ResourceClaims cannot be allocated where it fits: {why}")
        written = list(self.pool.map(lambda job: self._write_claim(*job), statuses))
        if not all(written):
            return Waiting("dra.write-failed", "a ResourceClaim's allocation could not be written; placed again")
        return None

    def _write_claim(self, claim: dra.Claim, status: dict) -> bool:
        """The claim with kube-scheduler's delete protection, then ``status``; each write names the resourceVersion
        it was made on, so a claim changed since it was read is refused, not overwritten."""
        path = f"{dra.API}/namespaces/{claim.namespace}/resourceclaims/{claim.name}/status"
        try:
            obj = self._protect(claim.obj)
            written = self._call("PUT", path, body={**obj, "status": status})
        except ApiException as error:
            log.warning("allocate %s: %s", claim.label, rest.api_error(error))
            self.state.count("claim_errors")
            return False
        except NotLeading:
            return False
        self._wrote_claim(obj, written)
        return True

    def protect_claims(self, claims: Iterable[dict]) -> None:
        """Give waiting pods' ``claims`` the delete protection ahead of their allocation (``dra.unprotected``), at
        most ``PROTECT_PER_PASS`` a pass; a claim whose write failed is tried again once it changes (its allocation
        writes the protection in any case)."""
        claims = [self._latest_claim(obj) for obj in claims]  # as this pass's allocations left them
        versions = {_claim_key(obj): obj["metadata"].get("resourceVersion") for obj in claims}
        self.unprotectable = {k: v for k, v in self.unprotectable.items() if versions.get(k) == v}
        todo = [obj for obj in claims if _claim_key(obj) not in self.unprotectable][:PROTECT_PER_PASS]

        def protect(obj: dict) -> None:
            try:
                self._protect(obj)
            except ApiException as error:
                log.info("protect ResourceClaim %s/%s: %s", *_claim_key(obj), rest.api_error(error))
                self.unprotectable[_claim_key(obj)] = obj["metadata"].get("resourceVersion")
            except NotLeading:
                return

        list(self.pool.map(protect, todo))

    def _protect(self, obj: dict) -> dict:
        """``obj`` with the delete-protection finalizer, added by a merge patch naming its resourceVersion when it
        lacks it (raises ApiException, NotLeading)."""
        meta = obj["metadata"]
        finalizers = meta.get("finalizers") or []
        if dra.DELETE_PROTECTION in finalizers:
            return obj
        path = f"{dra.API}/namespaces/{meta['namespace']}/resourceclaims/{meta['name']}"
        body = {
            "metadata": {
                "finalizers": [*finalizers, dra.DELETE_PROTECTION],
                "resourceVersion": meta.get("resourceVersion"),
            }
        }
        written = self._call("PATCH", path, body=body, content_type=rest.MERGE_PATCH)
        self._wrote_claim(obj, written)
        return written

    def _wrote_claim(self, before: dict, written: dict) -> None:
        """Keep ``written`` in the assume cache while the informer shows ``before`` or an earlier version this
        process wrote over."""
        key = _claim_key(before)
        seen = {before["metadata"].get("resourceVersion", ""), *self.claimed.get(key, (set(), {}))[0]}
        written["metadata"].pop("managedFields", None)
        self.claimed[key] = (seen, written)

    def release_claims(self, claims: list[dra.Claim]) -> None:
        """Clear the allocation and reservations an interrupted pass wrote on claims whose pods it did not bind (an
        allocation cannot be changed, only cleared), so their gangs are allocated anew."""
        for claim in claims:
            path = f"{dra.API}/namespaces/{claim.namespace}/resourceclaims/{claim.name}/status"
            body = {**claim.obj, "status": {**(claim.obj.get("status") or {}), "allocation": None, "reservedFor": []}}
            try:
                written = self._call("PUT", path, body=body)
            except ApiException as error:
                log.warning("release %s: %s", claim.label, rest.api_error(error))
                continue
            except NotLeading:
                return
            self._wrote_claim(claim.obj, written)
            self.state.record("release-claim", claim.label, "allocated by an interrupted pass; released", "", ())

    def remove(self, objects: GangObjects, reason: str, kind: str, cause: str = "") -> set[str]:
        """Evict (reclaim, preemption) or delete (restart, failure, release) every bound pod of a gang that is not
        leaving already, in parallel; the nodes they leave. A failure keeps the pods that have ended (they hold
        nothing; their logs and exit codes are what the user reads), a restart deletes them for the owner to make
        anew. A gang whose pods are all leaving already was removed by an earlier pass: nothing is written,
        recorded or told again."""
        bound = [pod for pod in objects.pods if pod["spec"].get("nodeName")]
        pods = [pod for pod in bound if not pod["metadata"].get("deletionTimestamp")]
        if not pods:
            return {pod["spec"]["nodeName"] for pod in bound}
        if kind == "fail":
            pods = [pod for pod in pods if live(pod)]
        options = {} if self.grace is None else {"gracePeriodSeconds": self.grace}

        def remove(pod: dict) -> None:
            meta = pod["metadata"]
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
            delete = {**options, "preconditions": {"uid": meta["uid"]}}
            try:
                if kind == "evict":
                    body = {
                        "apiVersion": "policy/v1",
                        "kind": "Eviction",
                        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                        "deleteOptions": delete,
                    }
                    self._call("POST", path + "/eviction", body=body)
                else:
                    self._call("DELETE", path, body=delete)
            except ApiException as error:
                if error.status != 404:
                    log.warning("%s %s/%s: %s", kind, meta["namespace"], meta["name"], rest.api_error(error))
                    return
            except NotLeading:
                return
            self.deleted.add(meta["uid"])

        list(self.pool.map(remove, pods))
        what, counter, event = REMOVALS[kind]
        what = what.format(cause=cause)
        nodes = {pod["spec"]["nodeName"] for pod in pods}
        self.state.record(kind, objects.name, f"{what}: {reason}", objects.queue, nodes)
        self.state.count(counter)
        self.metrics.removed(cause or kind)
        self.reporter.event(objects.kind, objects.owner, event, f"{what}: {reason}", warning=True)
        return nodes

    def keep_evidence(self, objects: GangObjects, reason: str) -> str:
        """Before a restart or failure deletes the gang's pods: what ended each failed one (exit code, reason, the
        last lines of its log), on the gang's owner and as a Warning Event; ``reason`` (the core's) with what ended
        them in a line each, for the decision's own Event, log line and dashboard row. The informer keeps little of
        a pod's status, so each failed pod is read whole first; reads are not fenced, the owner's annotation is."""
        failed = [
            pod
            for pod in objects.pods
            if (pod.get("status") or {}).get("phase") == "Failed" and not pod["metadata"].get("deletionTimestamp")
        ]
        found = []
        for pod in failed:
            meta = pod["metadata"]
            with contextlib.suppress(ApiException):  # gone meanwhile: its phase is all there is
                pod = rest.call(self.api, "GET", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}")
            found.append(evidence.describe(pod, evidence.log_tail(self.api, pod)))
        if not found:
            return reason
        text = "\n\n".join(found)[: evidence.EVIDENCE_CHARS]
        self.patch_owner(objects, {LAST_FAILURE: text})
        self.reporter.event(objects.kind, objects.owner, "MemberFailed", text, warning=True)
        # the PodGroup's own owner too (an MPIJob, a Job), which may delete the PodGroup once it gives up
        for ref in (objects.group or {}).get("metadata", {}).get("ownerReferences") or []:
            if ref.get("controller"):
                job = {"apiVersion": ref["apiVersion"], "metadata": {**ref, "namespace": objects.namespace}}
                self.reporter.event(ref["kind"], job, "MemberFailed", text, warning=True)
        return f"{reason} ({'; '.join(one.splitlines()[0] for one in found)})"

    def _avoid(self, objects: GangObjects, running: core.RunningGang, now: float) -> dict[str, str]:
        """The owner's annotation for the nodes of the members whose failure restarts the gang ({} when none, or
        when avoiding is off)."""
        nodes = {running.placement[member] for member in running.failed_members if member in running.placement}
        if not nodes or not self.avoid_seconds:
            return {}
        before = Avoid.decode(objects.annotations()) or Avoid((), 0.0)
        return {AVOID: before.joined(nodes, now + self.avoid_seconds, now).encode()}

    # -- carrying decisions out ----------------------------------------------------------------------------------
    def act(self, decisions: core.Decisions, view: Translation, now: float) -> dict[str, Waiting]:
        """The core's decisions in the order it documents: evictions, restarts and failures, then binds (every
        member of a gang in parallel). Each batch starts only while the fence holds. What a gang decided bound
        waits for instead, by gang."""
        held: dict[str, Waiting] = {}
        leaving: set[str] = set()  # nodes whose pods are being deleted: not bound to until they are gone
        staying: dict[str, Waiting] = {}  # node -> why: a victim that a budget protects still runs there
        budgets = Budgets(lambda namespace: rest.call(self.api, "GET", PDBS.format(namespace=namespace)))
        for eviction in decisions.evictions:
            if not self.fence():
                return held
            objects = view.gangs[eviction.gang_name]
            refusal = self._refusal(objects, budgets)
            if refusal is None:
                leaving |= self.remove(objects, eviction.reason, "evict", eviction.cause)
                continue
            for pod in objects.pods:
                if pod["spec"].get("nodeName"):
                    staying[pod["spec"]["nodeName"]] = refusal
        try:
            running = {gang.gang.name: gang for gang in view.running}
            for restart in decisions.restarts:
                objects = view.gangs[restart.gang_name]
                reason = self.keep_evidence(objects, restart.reason)
                waiting = host.restarted(running[restart.gang_name].gang, restart)
                backoff = Backoff(waiting.restart_count, waiting.not_before)
                avoid = self._avoid(objects, running[restart.gang_name], now)
                self.patch_owner(objects, {**backoff.encode(), PLACEMENT: None, **avoid})
                leaving |= self.remove(objects, reason, "restart")
            for failure in decisions.failures:
                objects = view.gangs[failure.gang_name]
                reason = self.keep_evidence(objects, failure.reason)
                self.patch_owner(objects, {FAILED: reason[:1000]})
                leaving |= self.remove(objects, reason, "fail")
        except NotLeading:
            return held
        binds: list[core.Bind] = []
        keeping: list[str] = []  # gangs bound in this pass whose pods keep others apart
        taken = set(view.devices.allocated) if view.devices is not None else set()  # and those allocated in this pass
        for bind in decisions.binds:
            nodes = set(bind.placement.values())
            blocked = next((staying[node] for node in sorted(nodes & set(staying))), None)
            pods = view.gangs[bind.gang_name].pods
            keeps = podaffinity.keeps_apart(pods)
            if blocked is not None:
                held[bind.gang_name] = blocked
            elif nodes & leaving:
                held[bind.gang_name] = Waiting("bind.deferred", "waits for the pods it replaces to leave")
                self.wake()
            elif (
                apart := self._kept_apart(view, pods, [b.gang_name for b in binds] if keeps else keeping)
            ) is not None:
                held[bind.gang_name] = Waiting(
                    "bind.deferred", f"must be kept apart from gang {apart}, bound first; placed again beside it"
                )
                self.wake()
            elif (unallocated := self.allocate_claims(bind, view, taken)) is not None:
                held[bind.gang_name] = unallocated
            else:
                binds.append(bind)
                if keeps:
                    keeping.append(bind.gang_name)
                continue
            objects = view.gangs[bind.gang_name]
            self.state.record("defer", bind.gang_name, held[bind.gang_name], objects.queue, nodes)
        if binds:
            self._bind_gangs(binds, view, now)
        return held

    @staticmethod
    def _kept_apart(view: Translation, pods: list[dict], others: list[str]) -> str | None:
        """The first of the gangs ``others``, bound earlier in this pass, that ``pods`` and its must be kept apart
        from (a required anti-affinity or topology spread of either names pods of the other), or None; the caller
        passes every gang bound so far when ``pods`` keep others apart, else only those that do. Each gang's rules
        were read against the pods bound before the pass, so the later one is placed again in the next, beside the
        earlier."""
        return next((other for other in others if podaffinity.kept_apart(pods, view.gangs[other].pods)), None)

    def _refusal(self, objects: GangObjects, budgets: Budgets) -> Waiting | None:
        """Why evicting the gang's bound pods must wait (a PodDisruptionBudget would refuse one of them), or None.
        A refusal holds for ``REFUSAL_SECONDS`` before the budgets are read again."""
        refused = self.refused.get(objects.name)
        if refused is not None and time.monotonic() < refused[0]:
            return refused[1]
        pods = [p for p in objects.pods if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]
        try:
            words = budgets.refuse(objects.namespace, pods)
        except ApiException as error:
            words = f"its PodDisruptionBudgets could not be read ({rest.api_error(error)})"
        if words is None:
            self.refused.pop(objects.name, None)
            return None
        refusal = Waiting("reclaim.blocked", f"reclaim waits: evicting gang {objects.name} {words}")
        self.refused[objects.name] = (time.monotonic() + REFUSAL_SECONDS, refusal)
        nodes = [pod["spec"]["nodeName"] for pod in pods]
        self.state.record("blocked", objects.name, refusal, objects.queue, nodes)
        self.state.count("evictions_blocked")
        self.reporter.event(objects.kind, objects.owner, "EvictionBlocked", refusal, warning=True)
        return refusal

    def _bind_gangs(self, binds: list[core.Bind], view: Translation, now: float) -> None:
        planning = time.perf_counter()
        planned = [bind for bind in binds if len(bind.placement) > 1]
        intents = list(self.pool.map(lambda bind: self.write_plan(view.gangs[bind.gang_name], bind), planned))
        refused = {bind.gang_name for bind, ok in zip(planned, intents, strict=True) if not ok}
        self.state.count("plan_seconds", time.perf_counter() - planning)
        jobs = []
        for bind in binds:
            if bind.gang_name in refused:
                continue
            objects = view.gangs[bind.gang_name]
            by_name = {pod["metadata"]["name"]: pod for pod in objects.pods}
            annotations = Start(now, bind.borrowed, bind.backfilled_past).encode()
            for member, node in bind.placement.items():
                jobs.append((bind.gang_name, by_name[member], node, annotations))
        binding = time.perf_counter()
        results = list(self.pool.map(lambda job: self.bind(*job[1:]), jobs))
        self.state.count("bind_seconds", time.perf_counter() - binding)
        bound_pods = {id(pod) for (_, pod, *_), ok in zip(jobs, results, strict=True) if ok}
        submitted = {gang.name: gang for gang in view.pending}
        for bind in binds:
            if bind.gang_name in refused:
                continue
            objects = view.gangs[bind.gang_name]
            pods = [pod for pod in objects.pods if pod["metadata"]["name"] in bind.placement]
            bound = sum(id(pod) in bound_pods for pod in pods)
            nodes = len(set(bind.placement.values()))
            detail = f"{bound}/{len(bind.placement)} pods on {nodes} nodes"
            if bind.backfilled_past:
                detail += f", backfilled past {bind.backfilled_past}"
            self.state.record("bind", bind.gang_name, detail, objects.queue, bind.placement.values())
            self.state.count("gangs_bound")
            self.state.count("pods_bound", bound)
            waited = submitted[bind.gang_name]
            self.metrics.bound(waited.queue, waited.submit_time, bound, len(bind.placement))
            for pod in pods:
                if id(pod) in bound_pods:
                    node = bind.placement[pod["metadata"]["name"]]
                    self.reporter.event("Pod", pod, "Scheduled", f"gang {bind.gang_name}: bound to {node}")
            if objects.group is not None:
                complete = bound == len(bind.placement)
                reason = "Scheduled" if complete else "FailedBinding"
                self.reporter.event(objects.kind, objects.group, reason, f"bound: {detail}", warning=not complete)

    # -- gangs an interrupted run left partly bound --------------------------------------------------------------
    def settle(self, view: Translation) -> None:
        """Complete or release every gang of ``view.partial``, each on what the ones before it left."""
        free = self._free_beside_bound(view)
        try:
            for objects in view.partial:
                self._settle_partial(objects, free, view.devices)
        except NotLeading:
            return

    def _fence_unbound(self, objects: GangObjects, message: str) -> None:
        """PodScheduled=False on every unbound member of a gang about to be released, before its bound ones go: the
        write moves each pod's resourceVersion, so a bind another replica decided before it lost the Lease (and
        sends after) is refused by the API server instead of landing on a released gang."""

        def write(pod: dict) -> None:
            path, body = pod_scheduled_patch(pod["metadata"], False, "Unschedulable", message)
            try:
                self._call("PATCH", path, body=body, content_type=rest.STRATEGIC_MERGE_PATCH)
            except ApiException as error:
                if error.status != 404:
                    log.warning(
                        "fence %s/%s: %s", pod["metadata"]["namespace"], pod["metadata"]["name"], rest.api_error(error)
                    )

        unbound = [pod for pod in objects.pods if not pod["spec"].get("nodeName")]
        list(self.pool.map(write, [pod for pod in unbound if not pod["metadata"].get("deletionTimestamp")]))

    @staticmethod
    def _free_beside_bound(view: Translation) -> dict[str, dict[str, int]]:
        """Free resources of the usable nodes, beside every pod of ours bound now (running and partial gangs)."""
        free = {node.name: dict(node.allocatable) for node in view.nodes if node.ready and node.schedulable}
        for running in view.running:
            requests = {member.name: member.requests for member in running.gang.members}
            for member, node in running.placement.items():
                add_amounts(free.setdefault(node, {}), requests[member], -1)
        for objects in view.partial:
            for pod in objects.pods:
                if pod["spec"].get("nodeName"):
                    add_amounts(free.setdefault(pod["spec"]["nodeName"], {}), pod_requests(pod), -1)
        return free

    def _settle_partial(
        self, objects: GangObjects, free: dict[str, dict[str, int]], devices: dra.Devices | None
    ) -> None:
        """Complete a gang a previous run left partly bound, on its written placement, if the pods the plan names
        still make the gang (its minMember) and every unbound one still fits its planned node; otherwise, or when a
        bind of it is refused, release it (delete its bound pods: the owner recreates them). A pod the plan does not
        name (added or recreated since) counts for nothing. ``free`` is what the nodes have left; a completed gang
        takes its share of it."""
        plan = objects.planned()
        bound = [pod for pod in objects.pods if pod["spec"].get("nodeName")]
        todo = [pod for pod in objects.pods if not pod["spec"].get("nodeName") and pod["metadata"]["uid"] in plan]
        need = objects.min_member or len(plan)
        left = {node: dict(room) for node, room in free.items()}
        why = None
        if len(bound) + len(todo) < need:
            why = f"placement names pods that no longer exist ({need - len(bound) - len(todo)})"
        for pod in todo if why is None else ():
            node = plan[pod["metadata"]["uid"]]
            if node not in left:
                why = "placement no longer fits"
                break
            add_amounts(left[node], pod_requests(pod), -1)
            if any(amount < 0 for amount in left[node].values()):
                why = "placement no longer fits"
            elif not dra.ready_on(pod, node, devices):
                why = f"pod {pod['metadata']['name']}'s ResourceClaims are not allocated for it on {node}"
        if why is None:
            annotations = Start.carried(bound[0]["metadata"].get("annotations") or {})
            free.update(left)
            done = sum(self.pool.map(lambda pod: self.bind(pod, plan[pod["metadata"]["uid"]], annotations), todo))
            detail = f"completed an interrupted bind: {done}/{len(todo)} more pods"
            self.state.record("complete", objects.name, detail, objects.queue, plan.values())
            self.state.count("partial_completed")
            if done == len(todo):
                return
            why = f"completing binds were refused for {len(todo) - done} of its pods"
            placed = [
                dict(pod, spec=dict(pod["spec"], nodeName=plan[pod["metadata"]["uid"]]))
                for pod in todo
                if pod["metadata"]["uid"] in self.assumed
            ]
            objects = dataclasses.replace(objects, pods=bound + placed)
        self._fence_unbound(objects, f"gang {objects.name} released: a previous run bound it in part and its {why}")
        self.remove(objects, f"a previous run bound it in part and its {why}", "release")
        self.patch_owner(objects, {PLACEMENT: None})
