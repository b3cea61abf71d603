"""``docs/simulation-results.md``: every trace, every policy, one document."""

from __future__ import annotations

import json
import os

from railforge.sim.metrics import summarise
from railforge.sim.tables import checks_headline, checks_md, hours, label, target_checks, targets_text, trace_section

SETUP = """\
## Setup

* **Simulator** (`railforge.sim.engine`): discrete events (arrival, completion, optional node
  failure and repair) in a heap; all events of one timestamp (or, with `--period P`, of one
  P-second scheduling cycle) are applied, then the scheduler core's own `decide()` runs once and
  its decisions are applied (evictions, restarts, failures, then binds).  The scheduler is also
  woken every 15 simulated minutes while gangs wait.  Evicted (reclaimed) or restarted gangs go
  back to pending with their original submit time and **lose all progress**.  Per-queue usage is
  decayed with the configured half-life (7 days) and handed to `decide()` for fair share.
* **Cluster**: 8-GPU nodes (128 cores, 1 TiB), 16 nodes per leaf, 8 leaves per spine, NVLink per
  host.  Philly uses 56 nodes (offered load 0.84, as in the trace README).  Each ITP cluster is
  sized to its own load: GPUs = GPU-time / submission span / 0.84, rounded *up* to whole nodes,
  but never below the largest job (cluster01's 64-GPU jobs force 8 nodes, so its load is only
  0.44).
* **Gangs**: up to 8 GPUs is one member; larger jobs are ceil(GPUs/8) workers (GPUs split evenly)
  plus a GPU-less MPI launcher, all required, preferring one leaf.
* **Queues**: Philly's 15 virtual clusters, quotas proportional to their GPU-time share (largest
  remainder, summing to the cluster), over-quota weight 1 each; ITP: one queue.
* **Runtime estimates** (`max_runtime`, read only by backfilling policies, so the FIFO and SJF
  baselines run once, marked `n/a`): `exact` = the true runtime; `user` = a seeded model: with
  probability 0.2 the user asks for the queue limit (7 days), otherwise runtime x U with U
  log-uniform on [1, 10], rounded up to a whole hour and capped at 7 days (never below the
  runtime: every trace job finished).
* **Policies** (`SchedulerConfig.preset`): `railforge` = fair share + EASY backfill with
  reservations + reclaim of borrowed capacity + preemption of gangs that backfilled past their
  queue's reservation holder when it could start in their place; `strict_fifo` = gang FIFO,
  nothing passes a blocked head; `best_effort_fifo` = FIFO order, any gang that fits starts (no
  reservations: large gangs can starve); `sjf_oracle` = shortest true runtime first, skip-ahead,
  no reservations.
* **Metrics**: JCT = end - submit; wait (queueing delay) = JCT - runtime (includes runs lost to
  evictions/restarts).  Size buckets by GPUs: 1, 2-8, 16+ (= more than 8, i.e. multi-node).
  Utilisation = time-weighted allocated GPUs / cluster GPUs over the arrival window (first to
  last submission); useful utilisation leaves out the GPU-time of runs later cut short (by an
  eviction or a restart: their work is done again), and is what the target compares.  Jain index
  over queues of (GPU-seconds received / fair-share GPU-seconds), the fair share being the
  scheduler's own water-filling (quota first, the rest by over-quota weight) of the queues'
  demand, recomputed after every pass; `-` with a single queue.
  Backfills = starts made while a gang ahead in the order held a reservation (the core's
  `Bind.backfilled_past`); reclaims = evictions of borrowed gangs; preemptions = evictions of
  gangs that started past their own queue's reservation holder, for it; restarts = gangs
  restarted after a node failure.  Times in hours.
"""


def _rel(path: str, start: str) -> str:
    return os.path.relpath(path, start or ".").replace(os.sep, "/")


def overview(rows) -> str:
    head = (
        "| trace | GPUs | policy (estimates) | mean JCT | p99 JCT | mean wait | p99 wait 16+ | util "
        "| useful util | Jain |\n"
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for trace, shape, s in rows:
        jain = "-" if s["jain"] != s["jain"] else f"{s['jain']:.3f}"
        lines.append(
            f"| {trace.name} | {shape.total_gpus} | {label(s)} | {hours(s['jct']['mean'])} | "
            f"{hours(s['jct']['p99'])} | {hours(s['wait']['mean'])} | "
            f"{hours(s['by_bucket']['16+']['wait']['p99'])} | {100 * s['util']:.1f}% | "
            f"{100 * s['util_useful']:.1f}% | {jain} |"
        )
    return "\n".join(lines)


def write_results_doc(doc: str, plots_dir: str, sections, command: str, elapsed: float, notes_file: str = "") -> str:
    """Write the doc; ``notes_file`` (hand-written Markdown, e.g. findings) is inlined after the
    targets table so that analysis survives regeneration."""
    doc_dir = os.path.dirname(doc)
    os.makedirs(doc_dir or ".", exist_ok=True)
    rows, checks, bodies, dump = [], [], [], {}
    for trace, shape, results, notes in sections:
        summaries = [summarise(r) for r in results]
        rows += [(trace, shape, s) for s in summaries]
        checks += [(f"{trace.name}: {n}", v, ok) for n, v, ok in target_checks(summaries)]
        sub = os.path.join(plots_dir, trace.name)
        bodies.append(trace_section(trace.name, results, summaries, sub, _rel(sub, doc_dir), notes))
        dump[trace.name] = summaries
    notes = ""
    if notes_file and os.path.exists(notes_file):
        with open(notes_file) as fh:
            notes = fh.read().strip() + "\n"
    text = "\n".join(
        [
            "# Simulation results",
            "",
            "Regenerate (from the repository root; the runs' replay times add up to "
            f"~{elapsed / 60:.0f} min on a shared 2-core machine, `--jobs 2` runs two at once):",
            "",
            "```sh",
            f"PYTHONPATH=src python -m railforge.cli {command.removeprefix('railforge ')}",
            "```",
            "",
            "Simulated time is deterministic: the same command gives the same numbers.",
            "",
            "## Quality targets",
            "",
            f"{checks_headline(checks)}  {targets_text()}",
            "",
            checks_md(checks),
            "",
            notes,
            "## Overview",
            "",
            overview(rows),
            "",
            SETUP,
            *bodies,
        ]
    )
    with open(doc, "w") as fh:
        fh.write(text)
    with open(os.path.join(plots_dir, "summary.json"), "w") as fh:
        json.dump(dump, fh, indent=1, default=float)
    return doc
