"""Telling users why: Events on pods, PodGroups and Queues, PodGroup status, the pods' PodScheduled condition.

Writes go through one background thread in the order they were asked for, so they never slow binding and an
older reason never lands after a newer one. Each is sent only when it changes: an Event with the same reason and
message on the same object is repeated (its count raised) at most once per ``interval``, and Events over all
objects are rate-limited; a status or condition equal to the last one written is not written again.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import time
from collections.abc import Callable

from kubernetes.client import ApiException

from railforge.k8s import rest

log = logging.getLogger(__name__)

PODGROUP_PATH = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups/{name}"
KINDS = {  # kind -> (apiVersion, path of one object)
    "Pod": ("v1", "/api/v1/namespaces/{namespace}/pods/{name}"),
    "PodGroup": ("scheduling.x-k8s.io/v1alpha1", PODGROUP_PATH),
    "Queue": ("railforge.io/v1alpha1", "/apis/railforge.io/v1alpha1/queues/{name}"),
}
EVENT_NAMESPACE_OF_CLUSTER_OBJECTS = "default"
MAX_OBJECTS_REMEMBERED = 100_000
# Events over all objects: a burst of this many, then this many a second (as client-go's event recorder spreads
# them); beyond it an Event is dropped and counted, never queued without bound
EVENT_BURST, EVENTS_PER_SECOND = 200, 50.0


def _now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Reporter:
    def __init__(self, api, component: str, interval: float):
        self.api = api
        self.component = component
        self.interval = interval
        self.work: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.events: dict[tuple, tuple[str, int, float]] = {}  # (uid, reason, message) -> (name, count, sent)
        self.written: dict[tuple[str, str], object] = {}  # (what, object uid) -> last value written
        self.tokens, self.refilled = float(EVENT_BURST), time.monotonic()
        self.dropped = 0  # Events left out by the rate limit
        self.thread = threading.Thread(target=self._run, name="reporter", daemon=True)

    def start(self) -> Reporter:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.work.put(None)
        self.thread.join(timeout=10)

    def drain(self, timeout: float = 10) -> None:
        """Wait until everything asked so far is written (tests)."""
        done = threading.Event()
        self.work.put(done.set)
        done.wait(timeout)

    def _run(self) -> None:
        while True:
            job = self.work.get()
            if job is None:
                return
            try:
                job()
            except ApiException as error:
                self._forget_failed(job)
                if error.status != 404:  # the object went away meanwhile: nothing to tell
                    log.warning("report: %s", rest.api_error(error))
            except Exception as error:
                self._forget_failed(job)
                log.warning("report: %s", error)

    def _forget_failed(self, job: Callable[[], None]) -> None:
        """A write that failed is not remembered as written, so the next pass tries it again."""
        key = getattr(job, "written_key", None)
        if key is not None:
            self.written.pop(key, None)

    def _put(self, key: tuple[str, str], job: Callable[[], None]) -> None:
        job.written_key = key
        self.work.put(job)

    def _changed(self, what: str, uid: str, value: object) -> bool:
        key = (what, uid)
        if self.written.get(key) == value:
            return False
        if len(self.written) > MAX_OBJECTS_REMEMBERED:
            self.written.clear()
        self.written[key] = value
        return True

    def event(self, kind: str, obj: dict, reason: str, message: str, warning: bool = False) -> None:
        meta = obj["metadata"]
        key = (meta["uid"], reason, message)
        now = time.monotonic()
        previous = self.events.get(key)
        if previous is not None and now - previous[2] < self.interval:
            return
        self.tokens = min(EVENT_BURST, self.tokens + (now - self.refilled) * EVENTS_PER_SECOND)
        self.refilled = now
        if self.tokens < 1:
            self.dropped += 1
            return
        self.tokens -= 1
        if len(self.events) > MAX_OBJECTS_REMEMBERED:
            self.events.clear()
        namespace = meta.get("namespace") or EVENT_NAMESPACE_OF_CLUSTER_OBJECTS
        if previous is None:
            digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:10]
            name = f"{meta['name'][:200]}.{digest}"
            self.events[key] = (name, 1, now)
            body = {
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "kind": kind,
                    "apiVersion": KINDS[kind][0],
                    "name": meta["name"],
                    "namespace": meta.get("namespace"),
                    "uid": meta["uid"],
                },
                "reason": reason,
                "message": message[:1024],
                "type": "Warning" if warning else "Normal",
                "source": {"component": self.component},
                "reportingComponent": self.component,
                "reportingInstance": self.component,
                "firstTimestamp": _now_rfc3339(),
                "lastTimestamp": _now_rfc3339(),
                "count": 1,
            }
            self.work.put(lambda: self._create_event(namespace, body))
        else:
            name, count, _ = previous
            self.events[key] = (name, count + 1, now)
            patch = {"count": count + 1, "lastTimestamp": _now_rfc3339()}
            path = f"/api/v1/namespaces/{namespace}/events/{name}"
            self.work.put(lambda: rest.call(self.api, "PATCH", path, body=patch, content_type=rest.MERGE_PATCH))

    def _create_event(self, namespace: str, body: dict) -> None:
        try:
            rest.call(self.api, "POST", f"/api/v1/namespaces/{namespace}/events", body=body)
        except ApiException as error:
            if error.status != 409:  # an Event of an earlier run with the same name: leave it
                raise

    def status(self, kind: str, obj: dict, status: dict) -> None:
        """Merge ``status`` into the object's status subresource when it differs from the last written."""
        meta = obj["metadata"]
        if not self._changed("status", meta["uid"], status):
            return
        path = KINDS[kind][1].format(namespace=meta.get("namespace"), name=meta["name"]) + "/status"
        body = {"status": status}
        self._put(
            ("status", meta["uid"]),
            lambda: rest.call(self.api, "PATCH", path, body=body, content_type=rest.MERGE_PATCH),
        )

    def annotate(self, kind: str, obj: dict, annotations: dict[str, str | None]) -> None:
        meta = obj["metadata"]
        current = meta.get("annotations") or {}
        wanted = {key: value for key, value in annotations.items() if current.get(key) != value}
        if not wanted or not self._changed("annotations", meta["uid"], annotations):
            return
        path = KINDS[kind][1].format(namespace=meta.get("namespace"), name=meta["name"])
        body = {"metadata": {"annotations": wanted}}
        self._put(
            ("annotations", meta["uid"]),
            lambda: rest.call(self.api, "PATCH", path, body=body, content_type=rest.MERGE_PATCH),
        )

    def pod_condition(self, pod: dict, reason: str, message: str) -> None:
        """The PodScheduled=False condition kube-scheduler sets, with our reason: ``kubectl describe pod``."""
        meta = pod["metadata"]
        if not self._changed("condition", meta["uid"], message):
            return
        condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
        self._put_condition(meta, condition)

    def pod_scheduled(self, pod: dict) -> None:
        """PodScheduled=True on a pod just bound that this process gave a False condition: the Binding sets True,
        but a False still queued here would land after it."""
        meta = pod["metadata"]
        if self.written.pop(("condition", meta["uid"]), None) is None:
            return
        self._put_condition(meta, {"type": "PodScheduled", "status": "True", "reason": None, "message": None})

    def _put_condition(self, meta: dict, condition: dict) -> None:
        path, body = pod_condition_patch(meta, condition)
        self._put(
            ("condition", meta["uid"]),
            lambda: rest.call(self.api, "PATCH", path, body=body, content_type=rest.STRATEGIC_MERGE_PATCH),
        )


def pod_condition_patch(meta: dict, condition: dict) -> tuple[str, dict]:
    """The path and strategic merge patch that set one condition of a pod's status, stamped now."""
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
    return path, {"status": {"conditions": [{**condition, "lastTransitionTime": _now_rfc3339()}]}}
