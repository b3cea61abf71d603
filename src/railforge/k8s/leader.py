"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

A candidate takes the Lease when it is free or its holder let it expire, and renews it every retry period; an
update names the resourceVersion it read, so two candidates never both win. A leader that has not renewed within
the renew deadline stops leading before the Lease can expire, so at no moment do two replicas act as leader.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable

from kubernetes.client import ApiException

from railforge.k8s import rest
from railforge.k8s.settings import LeaderElection

log = logging.getLogger(__name__)


def _micro_time(moment: float) -> str:
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _epoch(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC).timestamp()


class LeaderElector:
    def __init__(
        self,
        api,
        settings: LeaderElection,
        lease_name: str,
        identity: str,
        on_change: Callable[[], None] = lambda: None,
    ):
        self.api = api
        self.settings = settings
        self.identity = identity
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{settings.namespace}/leases/{lease_name}"
        self.collection = f"/apis/coordination.k8s.io/v1/namespaces/{settings.namespace}/leases"
        self.name = lease_name
        self.leading = threading.Event()
        self.on_change = on_change  # called on every gain or loss
        self.renewed_at = 0.0  # monotonic time of the last successful renewal
        self.holder = ""  # who held the Lease when this replica last read or took it
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="leader-election", daemon=True)

    def start(self) -> LeaderElector:
        self.thread.start()
        return self

    def is_leader(self) -> bool:
        """True only while the last renewal is younger than the renew deadline: the fence the write side checks
        before every write, so a replica paused past the deadline writes nothing once it continues."""
        if not self.leading.is_set():
            return False
        if time.monotonic() - self.renewed_at > self.settings.renew_deadline_seconds:
            self._lose("renewal overdue")
            return False
        return True

    def stop(self) -> None:
        """Stop; a leader hands the Lease back so another replica takes over at once."""
        self.stopping.set()
        self.thread.join(timeout=5)
        if self.leading.is_set():
            self._lose("stopping")
            try:
                lease = rest.call(self.api, "GET", self.path)
                if lease["spec"].get("holderIdentity") == self.identity:
                    lease["spec"]["holderIdentity"] = None
                    rest.call(self.api, "PUT", self.path, body=lease)
            except (ApiException, OSError) as error:
                log.warning("could not release lease %s: %s", self.name, error)

    def _lose(self, why: str) -> None:
        if self.leading.is_set():
            log.warning("%s: no longer leader of %s (%s)", self.identity, self.name, why)
            self.leading.clear()
            self.on_change()

    def _spec(self, now: float, acquired: float, transitions: int) -> dict:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.settings.lease_duration_seconds)),
            "acquireTime": _micro_time(acquired),
            "renewTime": _micro_time(now),
            "leaseTransitions": transitions,
        }

    def _try(self) -> bool:
        now = time.time()
        try:
            lease = rest.call(self.api, "GET", self.path)
        except ApiException as error:
            if error.status != 404:
                raise
            body = {"metadata": {"name": self.name}, "spec": self._spec(now, now, 0)}
            try:
                rest.call(self.api, "POST", self.collection, body=body)
            except ApiException as conflict:
                if conflict.status == 409:
                    return False  # another replica created it first
                raise
            self.holder = self.identity
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        renewed = _epoch(spec.get("renewTime"))
        duration = spec.get("leaseDurationSeconds") or self.settings.lease_duration_seconds
        if holder and holder != self.identity and renewed + duration > now:
            self.holder = holder
            return False
        transitions = spec.get("leaseTransitions") or 0
        if holder == self.identity:
            acquired = _epoch(spec.get("acquireTime")) or now
        else:
            acquired, transitions = now, transitions + 1
        lease["spec"] = self._spec(now, acquired, transitions)
        try:
            rest.call(self.api, "PUT", self.path, body=lease)  # carries the resourceVersion read: optimistic
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        self.holder = self.identity
        return True

    def _run(self) -> None:
        while not self.stopping.is_set():
            started = time.monotonic()
            try:
                won = self._try()
            except Exception as error:  # API unreachable: keep leading only until the renew deadline
                log.warning("lease %s: %s", self.name, error)
                won = None
            if won:
                self.renewed_at = started
                if not self.leading.is_set():
                    log.info("%s: leading %s", self.identity, self.name)
                    self.leading.set()
                    self.on_change()
            elif won is False:
                self._lose("another replica holds the lease")
            else:
                self.is_leader()  # drops leadership once the renewal is overdue
            self.stopping.wait(self.settings.retry_period_seconds)
