"""Trace loaders: Philly (Pollux artifact), Microsoft ITP (ElasticFlow) and a generic CSV.

Every loader returns a list of :class:`JobRecord` sorted by submit time, with submit times
shifted so the first job arrives at t=0.  Times are seconds (floats).

Generic CSV format (``csv:PATH``), header row required, extra columns ignored::

    submit,duration,gpus,queue,priority,max_runtime
    0,3600,8,research,,
    30,600,1,prod,10,7200

``submit`` and ``duration`` are seconds, ``gpus`` an integer >= 0, ``queue`` a name (empty means
``default``), ``priority`` an optional integer (default 0) and ``max_runtime`` an optional user
runtime estimate in seconds (used by the ``user`` estimate model instead of the synthetic one).
``docs/simulation-csv.md`` documents it for users.
"""

from __future__ import annotations

import csv
import math
import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TypeVar


@dataclass(frozen=True, slots=True)
class JobRecord:
    job_id: str
    submit: float
    duration: float
    gpus: int
    queue: str = "default"
    priority: int = 0
    user_estimate: float | None = None


@dataclass(frozen=True, slots=True)
class Trace:
    name: str
    jobs: list[JobRecord]

    @property
    def span(self) -> float:
        """Submission span in seconds (first to last arrival)."""
        if not self.jobs:
            return 0.0
        return self.jobs[-1].submit - self.jobs[0].submit

    @property
    def gpu_time(self) -> float:
        return sum(j.gpus * j.duration for j in self.jobs)

    def queue_gpu_time(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for j in self.jobs:
            out[j.queue] += j.gpus * j.duration
        return dict(sorted(out.items()))

    @property
    def max_gpus(self) -> int:
        return max((j.gpus for j in self.jobs), default=0)


def _normalise(name: str, jobs: list[JobRecord]) -> Trace:
    jobs.sort(key=lambda j: (j.submit, j.job_id))
    if jobs:
        t0 = jobs[0].submit
        jobs = [replace(j, submit=j.submit - t0) for j in jobs]
    return Trace(name=name, jobs=jobs)


def load_philly(path: str | os.PathLike[str]) -> Trace:
    """Philly trace as shipped with the Pollux artifact: timestamp,duration,num_gpus,gpu_time,cluster.

    The file is not sorted by timestamp; the 15 virtual clusters become queues.  Job ids are the
    1-based row numbers (the file carries none).
    """
    jobs: list[JobRecord] = []
    with open(path, newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh), start=1):
            ts = datetime.fromisoformat(row["timestamp"]).replace(tzinfo=UTC).timestamp()
            jobs.append(
                JobRecord(
                    job_id=f"philly-{i:05d}",
                    submit=ts,
                    duration=max(1.0, float(row["duration"])),
                    gpus=int(row["num_gpus"]),
                    queue=f"vc-{row['cluster']}",
                )
            )
    return _normalise("philly", jobs)


def load_itp(path: str | os.PathLike[str], name: str | None = None) -> Trace:
    """ElasticFlow ITP raw trace: job_id,submission_time,duration,num_gpu.  One queue ``default``."""
    jobs: list[JobRecord] = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            jobs.append(
                JobRecord(
                    job_id=row["job_id"],
                    submit=float(row["submission_time"]),
                    duration=max(1.0, float(row["duration"])),
                    gpus=int(row["num_gpu"]),
                )
            )
    if name is None:
        name = "itp-" + os.path.splitext(os.path.basename(os.fspath(path)))[0]
    return _normalise(name, jobs)


Number = TypeVar("Number", int, float)


def _value(
    path: object, line: int, row: dict, column: str, parse: Callable[[str], Number], signed: bool = False
) -> Number:
    """One value of a generic-CSV row; one that is no such number (or negative, unless ``signed``)
    is refused naming its line and column."""
    text = (row.get(column) or "").strip()
    try:
        value = parse(text)
        valid = (signed or value >= 0) and math.isfinite(value)
    except ValueError:
        valid = False
    if not valid:
        kind = "a whole number" if parse is int else "a number of seconds"
        raise ValueError(f"{path}, line {line}: {column} is {text!r}; expected {kind}{'' if signed else ' >= 0'}")
    return value


def _optional_value(
    path: object, line: int, row: dict, column: str, parse: Callable[[str], Number], signed: bool = False
) -> Number | None:
    """``_value``, or None where the column is empty."""
    return _value(path, line, row, column, parse, signed) if (row.get(column) or "").strip() else None


def load_generic_csv(path: str | os.PathLike[str]) -> Trace:
    """Generic CSV (see the module docstring for the format)."""
    jobs: list[JobRecord] = []
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"submit", "duration", "gpus"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
        for i, row in enumerate(reader, start=1):
            line = reader.line_num
            priority = _optional_value(path, line, row, "priority", int, signed=True)
            jobs.append(
                JobRecord(
                    job_id=(row.get("job_id") or "").strip() or f"job-{i:06d}",
                    submit=_value(path, line, row, "submit", float),
                    duration=max(1.0, _value(path, line, row, "duration", float)),
                    gpus=_value(path, line, row, "gpus", int),
                    queue=(row.get("queue") or "").strip() or "default",
                    priority=priority or 0,
                    user_estimate=_optional_value(path, line, row, "max_runtime", float),
                )
            )
    if not jobs:
        raise ValueError(f"{path}: no jobs (a header row and no data rows); expected at least one job row")
    name = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    return _normalise(name, jobs)


def load_trace(spec: str, traces_dir: str | os.PathLike[str] = "../shared/traces") -> Trace:
    """Resolve ``philly``, ``itp:cluster01`` or ``csv:PATH``."""
    if spec == "philly":
        return load_philly(os.path.join(traces_dir, "philly-pollux", "philly.csv"))
    if spec.startswith("itp:"):
        cluster = spec.split(":", 1)[1]
        return load_itp(os.path.join(traces_dir, "elasticflow-itp", "raw", f"{cluster}.csv"))
    if spec.startswith("csv:"):
        return load_generic_csv(spec.split(":", 1)[1])
    raise ValueError(f"unknown trace {spec!r}: use philly, itp:clusterNN or csv:PATH")


def size_for_load(trace: Trace, target_load: float = 0.84, gpus_per_node: int = 8) -> int:
    """Nodes needed so that the trace's offered load is about ``target_load``.

    GPUs = GPU-time / submission span / target_load, rounded up to whole nodes (so the load is at most
    the target); never fewer nodes than the largest job needs (otherwise it could never run).
    """
    if not trace.jobs or trace.span <= 0:
        return max(1, math.ceil(trace.max_gpus / gpus_per_node))
    gpus = trace.gpu_time / trace.span / target_load
    nodes = max(1, math.ceil(gpus / gpus_per_node - 1e-9))
    return max(nodes, math.ceil(trace.max_gpus / gpus_per_node))
