"""Why a gang's members failed, read before the scheduler deletes them (a restart, a failure): each failed pod's
exit code, reason and message as its container status gives them, and the last lines of its log. Written to the
gang's owner (``railforge.io/last-failure``) and told as a Warning ``MemberFailed`` Event, so ``kubectl describe``
still says why after the pods are gone."""

from __future__ import annotations

from kubernetes.client import ApiException

from railforge.k8s import rest

LOG_LINES = 20  # of each failed pod's log
LOG_BYTES = 4096
EVIDENCE_CHARS = 4000  # an annotation's share of the object's 256 KiB


def termination(pod: dict) -> str:
    """How a failed pod ended, in words: the first container that ended non-zero (its current state, else its last),
    e.g. ``exited 3 (Error): bad rank``; else the pod's own reason and message (``Evicted``, a node lost)."""
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        for state in (container.get("state") or {}, container.get("lastState") or {}):
            ended = state.get("terminated")
            if ended and ended.get("exitCode"):
                words = f"container {container['name']} exited {ended['exitCode']} ({ended.get('reason') or 'Error'})"
                message = (ended.get("message") or "").strip()
                return f"{words}: {message}" if message else words
    reason, message = status.get("reason"), (status.get("message") or "").strip()
    if reason or message:
        return ": ".join(filter(None, (reason, message)))
    return "failed (its status gives no exit code)"


def log_tail(api, pod: dict) -> str:
    """The last lines of the failed container's log ("" when the API has none: a container that never started, a
    node that is gone)."""
    meta = pod["metadata"]
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    failed = next(
        (c["name"] for c in statuses if ((c.get("state") or {}).get("terminated") or {}).get("exitCode")), None
    )
    query = [("tailLines", str(LOG_LINES)), ("limitBytes", str(LOG_BYTES))]
    if failed:
        query.append(("container", failed))
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/log"
    try:
        response = rest.open_request(api, "GET", path, query=query)
    except ApiException:
        return ""
    try:
        return response.read().decode("utf-8", "replace").rstrip()
    finally:
        rest.release(response)


def describe(pod: dict, tail: str) -> str:
    """One failed member's evidence: what ended it, then its log's last lines."""
    text = f"member {pod['metadata']['name']} {termination(pod)}"
    return f"{text}\nlast lines of its log:\n{tail}" if tail else text
