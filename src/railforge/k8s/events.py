"""Telling users why: Events on pods, PodGroups and Queues, PodGroup status, the pods' PodScheduled condition.

Writes go through one background thread, so they never slow binding. Each is sent only when it changes: an Event
with the same reason and message on the same object is repeated (its count raised) at most once per ``interval``,
and Events over all objects are rate-limited; a status or condition equal to the last one written is not written
again. Under churn the writes waiting are coalesced per object, bounded, and the ones that matter go first
(``WriteQueue``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from kubernetes.client import ApiException

from railforge.k8s import rest
from railforge.k8s.gangapis import GANG_APIS

log = logging.getLogger(__name__)

KINDS = {  # kind (with its API group where two share a name) -> (apiVersion, path of one object)
    "Pod": ("v1", "/api/v1/namespaces/{namespace}/pods/{name}"),
    "Queue": ("railforge.io/v1alpha1", "/apis/railforge.io/v1alpha1/queues/{name}"),
    **{api.kind: (api.api_version, api.path("{namespace}", "{name}")) for api in GANG_APIS},
}
EVENT_NAMESPACE_OF_CLUSTER_OBJECTS = "default"
MAX_OBJECTS_REMEMBERED = 100_000
# Events over all objects: a burst of this many, then this many a second (as client-go's event recorder spreads
# them); beyond it an Event is dropped and counted, never queued without bound
EVENT_BURST, EVENTS_PER_SECOND = 200, 50.0
MAX_WAITING_WRITES = 10_000


Write = Callable[[], object]


class WriteQueue:
    """The writes waiting for the reporter's thread, at most one per key: asking again for a key still waiting
    replaces its write where it stands (the latest wins, its place in line is kept). Urgent writes (a bound pod's
    condition, a new pending pod's first reason) go before the others. Beyond ``limit`` waiting ordinary writes the
    oldest is dropped and handed to ``on_drop``; the next pass asks for it again."""

    def __init__(self, limit: int, on_drop: Callable[[Hashable], None]):
        self.limit = limit
        self.on_drop = on_drop
        self.urgent: OrderedDict[Hashable, Write] = OrderedDict()
        self.ordinary: OrderedDict[Hashable, Write] = OrderedDict()
        self.dropped = 0
        self.closed = False
        self.ready = threading.Condition()

    def __len__(self) -> int:
        return len(self.urgent) + len(self.ordinary)

    def put(self, key: Hashable, write: Write, urgent: bool = False) -> None:
        with self.ready:
            if key in self.urgent:
                self.urgent[key] = write
            elif urgent:
                self.ordinary.pop(key, None)
                self.urgent[key] = write
            else:
                self.ordinary[key] = write
                if len(self.ordinary) > self.limit:
                    dropped, _ = self.ordinary.popitem(last=False)
                    self.dropped += 1
                    self.on_drop(dropped)
            self.ready.notify()

    def take(self) -> tuple[Hashable, Write] | None:
        """The next write (urgent first, then in the order asked), waiting for one; None once closed and empty."""
        with self.ready:
            while not (self.urgent or self.ordinary or self.closed):
                self.ready.wait()
            lane = self.urgent or self.ordinary
            return lane.popitem(last=False) if lane else None

    def close(self) -> None:
        with self.ready:
            self.closed = True
            self.ready.notify()

    def discard(self) -> None:
        """Drop every waiting write, each handed to ``on_drop``."""
        with self.ready:
            dropped = [*self.urgent, *self.ordinary]
            self.urgent.clear()
            self.ordinary.clear()
            self.dropped += len(dropped)
        for key in dropped:
            self.on_drop(key)


@dataclass
class _Event:
    """One Event this process sent or will send: created on its first write, its count raised on the next ones."""

    namespace: str
    body: dict
    count: int = 1
    sent_at: float = 0.0
    created: bool = False


class Reporter:
    def __init__(self, api, component: str, interval: float):
        self.api = api
        self.component = component
        self.interval = interval
        self.work = WriteQueue(MAX_WAITING_WRITES, self._forget)
        self.events: dict[tuple[str, str, str], _Event] = {}  # (uid, reason, message) -> the Event
        self.written: dict[Hashable, object] = {}  # (what, object uid) -> last value written
        self.tokens, self.refilled = float(EVENT_BURST), time.monotonic()
        self.dropped = 0  # Events left out by the rate limit
        self.thread = threading.Thread(target=self._run, name="reporter", daemon=True)

    def start(self) -> Reporter:
        self.thread.start()
        return self

    def stop(self, timeout: float = 10) -> None:
        """Write what was asked before the stop, for up to ``timeout`` seconds; what still waits then is dropped (the
        scheduler that leads next reports its own passes), so nothing is written after this returns but the one
        write under way."""
        self.work.close()
        self.thread.join(timeout)
        self.work.discard()

    def drain(self, timeout: float = 10) -> None:
        """Wait until everything asked so far is written (tests)."""
        done = threading.Event()
        self.work.put(("drain", id(done)), done.set)
        done.wait(timeout)

    def _run(self) -> None:
        while (taken := self.work.take()) is not None:
            key, write = taken
            try:
                write()
            except ApiException as error:
                self._forget(key)
                if error.status != 404:  # the object went away meanwhile: nothing to tell
                    log.warning("report: %s", rest.api_error(error))
            except Exception as error:
                self._forget(key)
                log.warning("report: %s", error)

    def _forget(self, key: Hashable) -> None:
        """A write that failed or was dropped is not remembered as written, so the next pass asks for it again."""
        self.written.pop(key, None)

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
        event = self.events.get(key)
        if event is not None and now - event.sent_at < self.interval:
            return
        self.tokens = min(EVENT_BURST, self.tokens + (now - self.refilled) * EVENTS_PER_SECOND)
        self.refilled = now
        if self.tokens < 1:
            self.dropped += 1
            return
        self.tokens -= 1
        if event is None:
            if len(self.events) > MAX_OBJECTS_REMEMBERED:
                self.events.clear()
            namespace = meta.get("namespace") or EVENT_NAMESPACE_OF_CLUSTER_OBJECTS
            digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:10]
            body = {
                "metadata": {"name": f"{meta['name'][:200]}.{digest}", "namespace": namespace},
                "involvedObject": {
                    "kind": kind.split(".", 1)[0],
                    "apiVersion": obj.get("apiVersion") or KINDS[kind][0],
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
                "firstTimestamp": rest.now_rfc3339(),
                "count": 1,
            }
            event = self.events[key] = _Event(namespace, body)
        else:
            event.count += 1
        event.sent_at = now
        self.work.put(("event", *key), lambda: self._send_event(event))

    def _send_event(self, event: _Event) -> None:
        """Create the Event, or raise its count to what it is now (repeats still waiting are written once)."""
        namespace, name = event.namespace, event.body["metadata"]["name"]
        if not event.created:
            body = {**event.body, "count": event.count, "lastTimestamp": rest.now_rfc3339()}
            try:
                rest.call(self.api, "POST", f"/api/v1/namespaces/{namespace}/events", body=body)
            except ApiException as error:
                if error.status != 409:  # an Event of an earlier run with the same name: leave it
                    raise
            event.created = True
            return
        patch = {"count": event.count, "lastTimestamp": rest.now_rfc3339()}
        path = f"/api/v1/namespaces/{namespace}/events/{name}"
        rest.call(self.api, "PATCH", path, body=patch, content_type=rest.MERGE_PATCH)

    def status(self, kind: str, obj: dict, status: dict) -> None:
        """Merge ``status`` into the object's status subresource when it differs from the last written."""
        meta = obj["metadata"]
        if not self._changed("status", meta["uid"], status):
            return
        path = KINDS[kind][1].format(namespace=meta.get("namespace"), name=meta["name"]) + "/status"
        body = {"status": status}
        self.work.put(
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
        self.work.put(
            ("annotations", meta["uid"]),
            lambda: rest.call(self.api, "PATCH", path, body=body, content_type=rest.MERGE_PATCH),
        )

    def pod_condition(self, pod: dict, reason: str, message: str) -> None:
        """The PodScheduled=False condition kube-scheduler sets, with our reason: ``kubectl describe pod``. A pod's
        first reason is urgent: a new pending pod says why before older news is written."""
        meta = pod["metadata"]
        first = ("condition", meta["uid"]) not in self.written
        if not self._changed("condition", meta["uid"], message):
            return
        self._put_condition(meta, pod_scheduled_patch(meta, False, reason, message), urgent=first)

    def pod_scheduled(self, pod: dict) -> None:
        """PodScheduled=True on a pod just bound that this process gave a False condition: the Binding sets True,
        but a False still waiting here would land after it, so True replaces it, urgently."""
        meta = pod["metadata"]
        if self.written.pop(("condition", meta["uid"]), None) is None:
            return
        self._put_condition(meta, pod_scheduled_patch(meta, True), urgent=True)

    def _put_condition(self, meta: dict, patch: tuple[str, dict], urgent: bool) -> None:
        path, body = patch
        self.work.put(
            ("condition", meta["uid"]),
            lambda: rest.call(self.api, "PATCH", path, body=body, content_type=rest.STRATEGIC_MERGE_PATCH),
            urgent,
        )


def pod_scheduled_patch(
    meta: dict, scheduled: bool, reason: str | None = None, message: str | None = None
) -> tuple[str, dict]:
    """The path and strategic merge patch that set a pod's PodScheduled condition, stamped now (None drops a
    field: True carries no reason)."""
    condition = {"type": "PodScheduled", "status": str(scheduled), "reason": reason, "message": message}
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
    return path, {"status": {"conditions": [{**condition, "lastTransitionTime": rest.now_rfc3339()}]}}
