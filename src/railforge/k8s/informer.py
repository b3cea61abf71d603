"""List + watch of one kind of object into a thread-safe cache.

The list gives a resourceVersion; the watch resumes from the last version seen (events and bookmarks move it).
A ``410 Gone`` (the version was compacted away) relists; a dropped connection or any other error reconnects with
exponential backoff. Objects are the API's JSON as dicts: no model classes, so custom resources and core ones
read the same.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from railforge.k8s import rest

log = logging.getLogger(__name__)

WATCH_SECONDS = 300  # the server ends each watch after about this long; the informer resumes it
BACKOFF_FIRST, BACKOFF_MAX = 0.2, 30.0


@dataclass
class Resource:
    """Where a kind lives: ``/api/v1/pods``, ``/apis/railforge.io/v1alpha1/queues``..."""

    kind: str
    path: str
    field_selector: str = ""
    label_selector: str = ""
    # keeps only the parts of an object the scheduler reads (a pod's managedFields are large and unused)
    trim: Callable[[dict], dict] = field(default=lambda obj: obj)
    wakes: bool = True  # a change starts a scheduling pass


def key_of(obj: dict) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


class Relist(Exception):
    """The watch cannot resume from its resourceVersion (410 Gone: compacted away; or a version the server does
    not have yet, after a restore): list afresh."""


class Informer:
    def __init__(self, api_client, resource: Resource, on_change: Callable[[], None]):
        self.api = api_client
        self.resource = resource
        self.on_change = on_change
        self.lock = threading.Lock()
        self.objects: dict[tuple[str, str], dict] = {}
        self.synced = threading.Event()
        self.version = ""
        self.stopping = threading.Event()
        self.relists = 0
        self.response = None  # the open watch, shut down by stop()
        self.thread = threading.Thread(target=self._run, name=f"informer-{resource.kind}", daemon=True)

    def start(self) -> Informer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        response = self.response
        if response is not None:
            with contextlib.suppress(OSError):  # the watch closed it meanwhile: nothing left to unblock
                response.response.shutdown()  # unblocks the watch's read at once

    def items(self) -> list[dict]:
        with self.lock:
            return list(self.objects.values())

    def get(self, namespace: str, name: str) -> dict | None:
        with self.lock:
            return self.objects.get((namespace, name))

    def _query(self, **extra: str) -> list[tuple[str, str]]:
        query = [
            (k, v)
            for k, v in (
                ("fieldSelector", self.resource.field_selector),
                ("labelSelector", self.resource.label_selector),
            )
            if v
        ]
        return query + list(extra.items())

    def _list(self) -> None:
        body = rest.call(self.api, "GET", self.resource.path, query=self._query(), timeout=60)
        objects = {key_of(obj): self.resource.trim(obj) for obj in body.get("items") or []}
        with self.lock:
            self.objects = objects
            self.version = body["metadata"]["resourceVersion"]
        self.relists += 1
        self.synced.set()
        self.on_change()

    def _not_served(self) -> None:
        """The server does not serve the kind (its CRD is not installed): count it as none until it does, so the
        scheduler still schedules what it can."""
        with self.lock:
            self.objects = {}
        if not self.synced.is_set():
            log.warning("%s: not served by the API server (is its CRD installed?); taken as none", self.resource.kind)
            self.synced.set()
            self.on_change()

    def _watch(self) -> None:
        query = self._query(
            watch="true",
            resourceVersion=self.version,
            allowWatchBookmarks="true",
            timeoutSeconds=str(WATCH_SECONDS),
        )
        response = rest.open_request(self.api, "GET", self.resource.path, query=query, timeout=(10, WATCH_SECONDS + 30))
        self.response = response
        try:
            for line in rest.stream_lines(response):
                if self.stopping.is_set():
                    return
                self._apply(json.loads(line))
        finally:
            self.response = None
            rest.release(response)

    def _apply(self, event: dict) -> None:
        kind, obj = event["type"], event["object"]
        if kind == "ERROR":
            raise Relist(f"{obj.get('code')} {obj.get('message', obj)}")
        version = obj["metadata"]["resourceVersion"]
        with self.lock:
            self.version = version
            if kind == "BOOKMARK":
                return
            if kind == "DELETED":
                self.objects.pop(key_of(obj), None)
            else:
                trimmed = self.resource.trim(obj)
                before = self.objects.get(key_of(obj))
                if before is not None and _unversioned(before) == _unversioned(trimmed):
                    # only what the trim drops changed (a pod's conditions, as the reporter writes them): the same
                    # object, at its new version (a Binding names it), and no pass
                    before["metadata"]["resourceVersion"] = version
                    return
                self.objects[key_of(obj)] = trimmed
        self.on_change()

    def _run(self) -> None:
        from kubernetes.client import ApiException

        backoff = BACKOFF_FIRST
        listed = False
        while not self.stopping.is_set():
            try:
                if not listed:
                    self._list()
                    listed = True
                self._watch()
                backoff = BACKOFF_FIRST  # a watch that ended normally: resume at once
                continue
            except Relist as error:
                log.info("%s: cannot resume the watch (%s); relisting", self.resource.kind, error)
                listed = False
                continue
            except ApiException as error:
                if error.status == 410:
                    listed = False
                    continue
                if error.status == 404 and not listed:
                    self._not_served()
                log.warning("%s: %s %s; retrying in %.1fs", self.resource.kind, error.status, error.reason, backoff)
            except Exception as error:  # connection reset, timeout, server restart: reconnect
                if self.stopping.is_set():
                    return
                log.warning("%s: %s; retrying in %.1fs", self.resource.kind, error, backoff)
            self.stopping.wait(backoff * (0.5 + random.random()))
            backoff = min(BACKOFF_MAX, backoff * 2)


def _unversioned(obj: dict) -> dict:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": None}}
