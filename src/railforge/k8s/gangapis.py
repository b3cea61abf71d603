"""The APIs a gang's pods join: scheduler-plugins' PodGroup (``podgroups.scheduling.x-k8s.io``, what mpi-operator
creates; pods name it by label) and Kubernetes' own (``podgroups.scheduling.k8s.io``, alpha in 1.36; pods name it in
``spec.schedulingGroup``). What differs between the two lives here: where an object is, how a pod joins it, its
minimum count, and the status it says "scheduled" with. Both kinds are called ``PodGroup``; Events carry the kind,
messages the kind with its API group, as ``kubectl`` needs them once both are served.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes.client import ApiException

from railforge.k8s import rest
from railforge.k8s.settings import LABEL_PREFIX

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
# Kubernetes' PodGroup has no timeout field: ours, on the PodGroup (a duration such as 90s or 5m)
SCHEDULE_TIMEOUT = LABEL_PREFIX + "schedule-timeout"


@dataclass(frozen=True)
class GangApi:
    group: str
    version: str
    member_key: str  # where a pod names its PodGroup: a label, or a field (messages)
    min_field: str  # the PodGroup's minimum count (messages)

    @property
    def joined_by(self) -> str:
        return f"label {self.member_key}" if self is SCHEDULER_PLUGINS else self.member_key

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def kind(self) -> str:
        """The kind with its API group: what messages and the Events' reporter key by."""
        return f"PodGroup.{self.group}"

    @property
    def collection(self) -> str:
        return f"/apis/{self.group}/{self.version}/podgroups"

    def path(self, namespace: str, name: str) -> str:
        return f"/apis/{self.group}/{self.version}/namespaces/{namespace}/podgroups/{name}"

    def podgroup(self, name: str, min_count: int) -> dict:
        """A PodGroup of this API for ``min_count`` pods that must start together (the arena, benchmarks)."""
        return {
            "apiVersion": self.api_version,
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": self.gang(min_count),
        }

    def gang(self, min_count: int) -> dict:
        raise NotImplementedError

    def joining(self, name: str) -> tuple[dict, dict]:
        """The labels and pod spec fields with which a pod joins PodGroup ``name``."""
        raise NotImplementedError

    def member_of(self, pod: dict) -> str | None:
        """The name of the PodGroup of this API that ``pod`` joins, or None."""
        raise NotImplementedError

    def min_count(self, group: dict) -> Any:
        """The PodGroup's minimum count as written (None without one); translation checks its type."""
        raise NotImplementedError

    def status(self, group: dict, phase: str, counts: tuple[int, int, int], reason: str) -> dict:
        """The status to write for ``phase`` (Pending, Scheduled, Running, Failed) with the members' Running,
        Succeeded and Failed counts and the reason the gang waits ("" when none)."""
        raise NotImplementedError


class SchedulerPluginsApi(GangApi):
    def gang(self, min_count: int) -> dict:
        return {"minMember": min_count}

    def joining(self, name: str) -> tuple[dict, dict]:
        return {GROUP_LABEL: name}, {}

    def member_of(self, pod: dict) -> str | None:
        return (pod["metadata"].get("labels") or {}).get(GROUP_LABEL) or None

    def min_count(self, group: dict) -> Any:
        return (group.get("spec") or {}).get("minMember")

    def status(self, group: dict, phase: str, counts: tuple[int, int, int], reason: str) -> dict:
        running, succeeded, failed = counts
        status: dict[str, object] = {"phase": phase, "running": running, "succeeded": succeeded, "failed": failed}
        if phase == "Scheduled" and not (group.get("status") or {}).get("scheduleStartTime"):
            status["scheduleStartTime"] = rest.now_rfc3339()
        return status


class NativeApi(GangApi):
    def gang(self, min_count: int) -> dict:
        return {"schedulingPolicy": {"gang": {"minCount": min_count}}}

    def joining(self, name: str) -> tuple[dict, dict]:
        return {}, {"schedulingGroup": {"podGroupName": name}}

    def member_of(self, pod: dict) -> str | None:
        return ((pod["spec"].get("schedulingGroup") or {}).get("podGroupName")) or None

    def min_count(self, group: dict) -> Any:
        """``gang.minCount``; a ``basic`` policy (pods need not start together) is a gang of at least one."""
        policy = (group.get("spec") or {}).get("schedulingPolicy") or {}
        if "gang" in policy:
            return (policy["gang"] or {}).get("minCount")
        return 1 if "basic" in policy else None

    def status(self, group: dict, phase: str, counts: tuple[int, int, int], reason: str) -> dict:
        """The one condition this API has, ``PodGroupScheduled``, with kube-scheduler's reasons; once True it stays
        True (as kube-scheduler keeps it); other conditions are kept as they are."""
        conditions = list((group.get("status") or {}).get("conditions") or [])
        current = next((c for c in conditions if c.get("type") == "PodGroupScheduled"), None)
        scheduled = phase != "Pending" or (current or {}).get("status") == "True"
        if scheduled:
            wanted = {"status": "True", "reason": "Scheduled", "message": ""}
        else:
            wanted = {"status": "False", "reason": "Unschedulable", "message": reason[:32768]}
        if current is not None and all(current.get(key) == value for key, value in wanted.items()):
            return {"conditions": conditions}
        condition = {"type": "PodGroupScheduled", **wanted, "lastTransitionTime": rest.now_rfc3339()}
        if (current or {}).get("status") == wanted["status"]:
            condition["lastTransitionTime"] = current["lastTransitionTime"]  # type: ignore[index]
        generation = group["metadata"].get("generation")
        if generation is not None:
            condition["observedGeneration"] = generation
        return {"conditions": [c for c in conditions if c.get("type") != "PodGroupScheduled"] + [condition]}


SCHEDULER_PLUGINS = SchedulerPluginsApi("scheduling.x-k8s.io", "v1alpha1", GROUP_LABEL, "spec.minMember")
NATIVE = NativeApi(
    "scheduling.k8s.io", "v1alpha2", "spec.schedulingGroup.podGroupName", "spec.schedulingPolicy.gang.minCount"
)
# The first a pod joins is its gang's: a pod labelled for a scheduler-plugins PodGroup that also joins the Kubernetes
# PodGroup its Job's controller made (the WorkloadWithJob gate) is in the gang its owner chose by label.
GANG_APIS = (SCHEDULER_PLUGINS, NATIVE)


def joined(pod: dict) -> tuple[GangApi, str] | None:
    """The API and name of the PodGroup ``pod`` joins, None for a pod on its own."""
    for api in GANG_APIS:
        name = api.member_of(pod)
        if name:
            return api, name
    return None


def served(api_client) -> tuple[GangApi, ...]:
    """The gang APIs the API server serves (its discovery): Kubernetes' own only with its feature gates and
    runtime-config on; scheduler-plugins' only once its CRD is installed — watched anyway, as before, so the CRD
    may come later."""
    found: list[GangApi] = [SCHEDULER_PLUGINS]
    try:
        resources = rest.call(api_client, "GET", f"/apis/{NATIVE.api_version}").get("resources") or []
    except ApiException:  # not served (404): pods that join it wait, saying so
        resources = []
    if any(resource.get("name") == "podgroups" for resource in resources):
        found.append(NATIVE)
    return tuple(found)
