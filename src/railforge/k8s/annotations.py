"""The ``railforge.io/`` annotations the scheduler writes and reads back: each key once, each value's codec both ways.

On a bound pod (a Binding's annotations, which the API server copies onto the pod): when its gang started, whether it
borrowed quota, what it was backfilled past (``Start``). On the gang's owner (its PodGroup, or the lone pod): the
placement written before binding (``encode_placement``), the restart count and backoff (``Backoff``), the failure
(``FAILED``), the evidence of the last failed members (``LAST_FAILURE``, railforge.k8s.evidence), the reason
shown to users (``REASON``, ``REASON_CODE``), a waiting gang's expected start (``EXPECTED_START``) and the nodes
a restarted gang avoids (``Avoid``). On a Node, what quarantined it (``Quarantine``, written by
railforge.k8s.quarantine). What users set (queue, runtime, topology) is read in translate.py.
"""

from __future__ import annotations

import calendar
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

from railforge.k8s.settings import LABEL_PREFIX

STARTED_AT = LABEL_PREFIX + "started-at"
BORROWED = LABEL_PREFIX + "borrowed"
BACKFILLED_PAST = LABEL_PREFIX + "backfilled-past"
PLACEMENT = LABEL_PREFIX + "placement"  # pod uid -> node, written before binding: what a restart completes
RESTARTS = LABEL_PREFIX + "restarts"
NOT_BEFORE = LABEL_PREFIX + "not-before"
FAILED = LABEL_PREFIX + "failed"
LAST_FAILURE = LABEL_PREFIX + "last-failure"  # what ended the failed members of the last restart or failure
REASON = LABEL_PREFIX + "reason"
REASON_CODE = LABEL_PREFIX + "reason-code"
EXPECTED_START = LABEL_PREFIX + "expected-start"  # when a waiting gang should start, to the minute
AVOID = LABEL_PREFIX + "avoid-nodes"  # where the gang's last start failed, avoided until a time
QUARANTINE = LABEL_PREFIX + "quarantine"  # on a Node (and its taint's key): the health checks it failed
QUARANTINE_TAINT_VALUE = "health"


@dataclass(frozen=True)
class Avoid:
    """The nodes a restarted gang avoids, and until when (on its owner)."""

    nodes: tuple[str, ...]
    until: float

    def encode(self) -> str:
        return json.dumps({"nodes": sorted(self.nodes), "until": self.until}, separators=(",", ":"))

    @classmethod
    def decode(cls, annotations: Mapping[str, str]) -> Avoid | None:
        """None when absent or unreadable (it only steers placement)."""
        try:
            value = json.loads(annotations.get(AVOID) or "null")
            return cls(tuple(str(node) for node in value["nodes"]), float(value["until"]))
        except (ValueError, TypeError, KeyError):
            return None

    def joined(self, nodes: set[str], until: float, now: float) -> Avoid:
        """These nodes added until ``until``; the ones still avoided kept, with the later time."""
        kept = set(self.nodes) if self.until > now else set()
        return Avoid(tuple(sorted(kept | nodes)), max(until, self.until) if kept else until)


@dataclass(frozen=True)
class Quarantine:
    """What quarantined a node: the checks or floors it failed, the report that says so, when (RFC 3339)."""

    failed: tuple[str, ...]
    report: str
    at: str

    def encode(self) -> str:
        return json.dumps({"failed": list(self.failed), "report": self.report, "at": self.at}, separators=(",", ":"))

    @classmethod
    def decode(cls, annotations: Mapping[str, str]) -> Quarantine | None:
        """None when absent; an unreadable value is kept as what failed (the taint does the quarantining)."""
        text = annotations.get(QUARANTINE)
        if text is None:
            return None
        try:
            value = json.loads(text)
            return cls(tuple(str(item) for item in value["failed"]), str(value["report"]), str(value["at"]))
        except (ValueError, TypeError, KeyError):
            return cls((text,), "", "")


def encode_expected_start(at: float) -> str:
    """``EXPECTED_START``'s value: UTC, rounded up to the minute, so a start of "now" is not rewritten every pass."""
    return time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(math.ceil(at / 60) * 60))


def decode_expected_start(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%MZ")))


@dataclass(frozen=True)
class Start:
    """How a gang started, on each of its bound pods."""

    KEYS = (STARTED_AT, BORROWED, BACKFILLED_PAST)

    at: float
    borrowed: bool
    backfilled_past: str | None = None

    def encode(self) -> dict[str, str]:
        encoded = {STARTED_AT: repr(self.at), BORROWED: "true" if self.borrowed else "false"}
        if self.backfilled_past:
            encoded[BACKFILLED_PAST] = self.backfilled_past
        return encoded

    @classmethod
    def decode(cls, annotations: Mapping[str, str], now: float) -> Start:
        """A pod bound without them (by an older version, by hand) started ``now`` as far as anyone knows."""
        return cls(
            float(annotations.get(STARTED_AT) or now),
            annotations.get(BORROWED) == "true",
            annotations.get(BACKFILLED_PAST) or None,
        )

    @classmethod
    def carried(cls, annotations: Mapping[str, str]) -> dict[str, str]:
        """A bound pod's start annotations as they are, for the pods bound later into the same gang."""
        return {key: value for key, value in annotations.items() if key in cls.KEYS}


@dataclass(frozen=True)
class Backoff:
    """A gang's restarts so far and the time before which it may not start again, on its owner."""

    restarts: int = 0
    not_before: float | None = None

    def encode(self) -> dict[str, str | None]:
        """None removes an annotation (a merge patch)."""
        return {
            RESTARTS: str(self.restarts),
            NOT_BEFORE: None if self.not_before is None else repr(self.not_before),
        }

    @classmethod
    def decode(cls, annotations: Mapping[str, str]) -> Backoff:
        not_before = annotations.get(NOT_BEFORE)
        return cls(int(annotations.get(RESTARTS) or 0), float(not_before) if not_before else None)


def encode_placement(plan: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(plan.items())), separators=(",", ":"))


def decode_placement(annotations: Mapping[str, str]) -> dict[str, str]:
    """Pod uid -> node of the placement written before binding; {} when none or unreadable."""
    try:
        plan = json.loads(annotations.get(PLACEMENT) or "{}")
    except ValueError:
        return {}
    return plan if isinstance(plan, dict) else {}
