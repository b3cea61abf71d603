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


def failed_container(pod: dict) -> tuple[str, dict, bool] | None:
    """The first container that ended non-zero: its name, its ``terminated`` state, and whether that ending is its
    last state (it has started again since) rather than its current one; None when none did."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        for state, previous in ((container.get("state"), False), (container.get("lastState"), True)):
            ended = (state or {}).get("terminated")
            if ended and ended.get("exitCode"):
                return container["name"], ended, previous
    return None


def termination(pod: dict) -> str:
    """How a failed pod ended, in words: the first container that ended non-zero (its current state, else its last),
    e.g. ``exited 3 (Error): bad rank``; else the pod's own reason and message (``Evicted``, a node lost)."""
    if (failed := failed_container(pod)) is not None:
        name, ended, _ = failed
        words = f"container {name} exited {ended['exitCode']} ({ended.get('reason') or 'Error'})"
        message = (ended.get("message") or "").strip()
        return f"{words}: {message}" if message else words
    status = pod.get("status") or {}
    reason, message = status.get("reason"), (status.get("message") or "").strip()
    if reason or message:
        return ": ".join(filter(None, (reason, message)))
    return "failed (its status gives no exit code)"


def log_tail(api, pod: dict) -> str:
    """The last lines of the failed container's log ("" when the API has none: a container that never started, a
    node that is gone)."""
    meta = pod["metadata"]
    query = [("tailLines", str(LOG_LINES)), ("limitBytes", str(LOG_BYTES))]
    if (failed := failed_container(pod)) is not None:
        name, _, previous = failed
        query.append(("container", name))
        if previous:  # the run that ended, not the one since
            query.append(("previous", "true"))
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
