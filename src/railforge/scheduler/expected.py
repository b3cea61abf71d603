"""Expected starts: when each waiting gang should start, from the core's own plan.

A decision reserves capacity for its first blocked gangs only (``reservation_depth``). For the gangs behind them, a
what-if plans on: the decisions carried out (its binds running from now, the gangs it evicts, restarts or fails
gone), every waiting gang is reserved in turn, in service order, at its earliest start (conservative backfill, no
reclaim), up to ``depth`` more gangs. The reserved gangs keep their own decision's start. A gang no plan can start
(what it needs is held by gangs without a max runtime, or it can never fit) has none. An estimate, as good as the
max runtimes it is built from: gangs that end early start others sooner.
"""

from __future__ import annotations

from dataclasses import replace

from railforge.scheduler.core import decide
from railforge.scheduler.host import started
from railforge.scheduler.model import Decisions, Snapshot

DEFAULT_DEPTH = 32


def expected_starts(snapshot: Snapshot, decisions: Decisions, depth: int = DEFAULT_DEPTH) -> dict[str, float]:
    """Gang name -> expected start of each waiting gang the plan can start: those ``decisions`` reserved, and up to
    ``depth`` gangs behind them."""
    starts = {reservation.gang_name: reservation.start for reservation in decisions.reservations}
    bound = {bind.gang_name: bind for bind in decisions.binds}
    gone = {
        *(evict.gang_name for evict in decisions.evictions),
        *(restart.gang_name for restart in decisions.restarts),
        *(fail.gang_name for fail in decisions.failures),
    }
    waiting = tuple(gang for gang in snapshot.pending if gang.name not in bound and gang.name not in gone)
    if depth <= 0 or len(waiting) <= len(starts):
        return starts
    pending = {gang.name: gang for gang in snapshot.pending}
    running = tuple(r for r in snapshot.running if r.gang.name not in gone) + tuple(
        started(pending[name], bind.placement, snapshot.now, borrowed=bind.borrowed) for name, bind in bound.items()
    )
    config = replace(
        snapshot.config,
        backfill="conservative",
        reservation_depth=len(starts) + depth,
        reclaim=False,
        preempt_backfill=False,
    )
    plan = decide(
        replace(snapshot, pending=waiting, running=running, config=config, reservations=tuple(decisions.reservations))
    )
    planned = {bind.gang_name: snapshot.now for bind in plan.binds}
    planned.update({reservation.gang_name: reservation.start for reservation in plan.reservations})
    return {**planned, **starts}
