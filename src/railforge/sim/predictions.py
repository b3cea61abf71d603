"""How good the expected starts are: a ``decide()`` that records, when a gang first waits, the start the core's
plan expects for it (``railforge.scheduler.expected``), and its error against when the gang really started."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from railforge.scheduler.core import Scheduler
from railforge.scheduler.expected import DEFAULT_DEPTH, expected_starts
from railforge.scheduler.model import Decisions, Snapshot
from railforge.sim.metrics import JobOutcome


class Predictor:
    """Pass as the simulator's ``decide``: decides as a ``Scheduler`` does, and plans expected starts in the
    passes where a gang waits for the first time (the adapter plans at most every few seconds)."""

    def __init__(self, depth: int = DEFAULT_DEPTH):
        self.scheduler = Scheduler()
        self.depth = depth
        self.predicted: dict[str, float | None] = {}  # gang -> the start expected when it first waited (None: none)

    def __call__(self, snapshot: Snapshot) -> Decisions:
        decisions = self.scheduler.decide(snapshot)
        bound = {bind.gang_name for bind in decisions.binds}
        first = [gang.name for gang in snapshot.pending if gang.name not in self.predicted and gang.name not in bound]
        if first:
            starts = expected_starts(snapshot, decisions, self.depth)
            for name in first:
                self.predicted[name] = starts.get(name)
        return decisions


def accuracy(predicted: dict[str, float | None], outcomes: Iterable[JobOutcome]) -> dict[str, float]:
    """Over the gangs that waited and then started: how many had an expected start, and the median and 90th
    percentile of its absolute error, against their median wait (seconds)."""
    started = [
        (outcome.first_start, outcome.submit, predicted[outcome.job_id])
        for outcome in outcomes
        if outcome.job_id in predicted and outcome.first_start is not None
    ]
    errors = sorted(abs(start - at) for start, _, at in started if at is not None)
    waits = sorted(start - submit for start, submit, _ in started)
    return {
        "waited": float(len(started)),
        "predicted": float(len(errors)),
        "median_error_s": statistics.median(errors) if errors else 0.0,
        "p90_error_s": errors[int(0.9 * (len(errors) - 1))] if errors else 0.0,
        "median_wait_s": statistics.median(waits) if waits else 0.0,
    }
