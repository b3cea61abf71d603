"""Markdown + PNG reports over one or more simulation runs of the same trace."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from railforge.sim.metrics import BUCKETS, SimResult, summarise

HOUR = 3600.0
DAY = 86400.0


def label(res_or_summary) -> str:
    if isinstance(res_or_summary, SimResult):
        return f"{res_or_summary.policy} ({res_or_summary.estimates})"
    return f"{res_or_summary['policy']} ({res_or_summary['estimates']})"


def hours(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    h = x / HOUR
    if h >= 100:
        return f"{h:,.0f}"
    if h >= 10:
        return f"{h:.1f}"
    return f"{h:.2f}"


def binned(series, edges: np.ndarray, col: int = 1) -> np.ndarray:
    """Time-weighted mean of a right-continuous step series inside each [edges[i], edges[i+1])."""
    if not series:
        return np.zeros(len(edges) - 1)
    t = np.array([r[0] for r in series], dtype=float)
    v = np.array([r[col] for r in series], dtype=float)
    cum = np.concatenate(([0.0], np.cumsum(v[:-1] * np.diff(t))))

    def integral(x: np.ndarray) -> np.ndarray:
        idx = np.searchsorted(t, x, side="right") - 1
        out = np.zeros_like(x)
        ok = idx >= 0
        out[ok] = cum[idx[ok]] + v[idx[ok]] * (x[ok] - t[idx[ok]])
        return out

    acc = integral(edges)
    return np.diff(acc) / np.diff(edges)


def _colours(n: int):
    cmap = plt.get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


def plot_jct_cdf(results: Sequence[SimResult], path: str, title: str) -> None:
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for res, c in zip(results, _colours(len(results)), strict=True):
        jct = np.sort([j.jct for j in res.jobs if j.jct is not None]) / HOUR
        if len(jct):
            ax.plot(jct, np.arange(1, len(jct) + 1) / len(jct), label=label(res), color=c, lw=1.6)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"{title}: JCT CDF")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_wait_by_bucket(summaries: Sequence[dict], path: str, title: str) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=False)
    width = 0.8 / max(1, len(summaries))
    x = np.arange(len(BUCKETS))
    for stat, ax in zip(("mean", "p99"), axes, strict=True):
        for i, (s, c) in enumerate(zip(summaries, _colours(len(summaries)), strict=True)):
            vals = [s["by_bucket"][b]["wait"][stat] / HOUR for b in BUCKETS]
            vals = [0.0 if math.isnan(v) else v for v in vals]
            ax.bar(x + (i - (len(summaries) - 1) / 2) * width, vals, width, label=label(s), color=c)
        ax.set_xticks(x, [f"{b} GPU" for b in BUCKETS])
        ax.set_yscale("symlog", linthresh=0.1)
        ax.set_ylabel(f"{stat} queueing delay (hours)")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_title(f"{title}: mean wait by gang size")
    axes[1].set_title("p99 wait by gang size")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _edges(results: Sequence[SimResult]) -> np.ndarray:
    end = max((r.series[-1][0] for r in results if r.series), default=1.0)
    start = min((r.series[0][0] for r in results if r.series), default=0.0)
    step = DAY if end - start > 4 * DAY else max((end - start) / 100, 1.0)
    return np.arange(start, max(end, start + step) + step, step)  # one bin at least: no job may have started


def bin_title(step: float) -> str:
    """What one bin of an over-time plot averages over, for its title (a day, or a hundredth of a
    run of up to four days: under an hour)."""
    if step == DAY:
        return "daily mean"
    if step >= 60:
        return f"mean per {step / 60:.3g} min"
    return f"mean per {step:.3g} s"


def plot_over_time(results: Sequence[SimResult], path: str, title: str, col: int, ylabel: str) -> None:
    """``title`` names the plot; the bin width the series are averaged over is added to it."""
    edges = _edges(results)
    step = edges[1] - edges[0]
    unit = DAY if step >= DAY else HOUR
    fig, ax = plt.subplots(figsize=(9, 4))
    for res, c in zip(results, _colours(len(results)), strict=True):
        y = binned(res.series, edges, col)
        if col == 1:
            y = 100.0 * y / res.total_gpus
        ax.step(edges[:-1] / unit, y, where="post", label=label(res), color=c, lw=1.2)
    ax.set_xlabel("simulated time (days)" if unit == DAY else "simulated time (hours)")
    ax.set_ylabel(ylabel)
    if col == 2:
        ax.set_yscale("symlog", linthresh=10)
    ax.set_title(f"{title} ({bin_title(step)})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(results: Sequence[SimResult], summaries: Sequence[dict], out_dir: str, title: str):
    os.makedirs(out_dir, exist_ok=True)
    files = {
        "jct_cdf": "jct_cdf.png",
        "wait_by_bucket": "wait_by_bucket.png",
        "utilization": "utilization.png",
        "queue_depth": "queue_depth.png",
    }
    plot_jct_cdf(results, os.path.join(out_dir, files["jct_cdf"]), title)
    plot_wait_by_bucket(summaries, os.path.join(out_dir, files["wait_by_bucket"]), title)
    plot_over_time(
        results,
        os.path.join(out_dir, files["utilization"]),
        f"{title}: GPU utilisation",
        1,
        "allocated GPUs (%)",
    )
    plot_over_time(
        results,
        os.path.join(out_dir, files["queue_depth"]),
        f"{title}: pending gangs",
        2,
        "pending gangs",
    )
    return files


TABLE_HEAD = (
    "| policy (estimates) | mean JCT | median JCT | p95 JCT | p99 JCT | mean wait | p99 wait 1 | "
    "p99 wait 2-8 | p99 wait 16+ | longest wait | util | useful util | makespan (d) | Jain | backfills "
    "| reclaims | preemptions | restarts | lost GPU-h |\n|---|" + "---:|" * 18
)


def table_rows(summaries: Sequence[dict]) -> str:
    rows = []
    for s in summaries:
        c = s["counters"]
        bb = s["by_bucket"]
        rows.append(
            "| "
            + " | ".join(
                [
                    label(s),
                    hours(s["jct"]["mean"]),
                    hours(s["jct"]["median"]),
                    hours(s["jct"]["p95"]),
                    hours(s["jct"]["p99"]),
                    hours(s["wait"]["mean"]),
                    hours(bb["1"]["wait"]["p99"]),
                    hours(bb["2-8"]["wait"]["p99"]),
                    hours(bb["16+"]["wait"]["p99"]),
                    hours(s["longest_wait"]),
                    f"{100 * s['util']:.1f}%",
                    f"{100 * s['util_useful']:.1f}%",
                    f"{s['makespan'] / DAY:.1f}",
                    "-" if math.isnan(s["jain"]) else f"{s['jain']:.3f}",
                    f"{int(c.get('backfills', 0)):,}",
                    f"{int(c.get('reclaims', 0)):,}",
                    f"{int(c.get('preemptions', 0)):,}",
                    f"{int(c.get('restarts', 0)):,}",
                    f"{c.get('lost_gpu_seconds', 0) / 3600:,.0f}",
                ]
            )
            + " |"
        )
    return "\n".join(rows)


def find(summaries: Sequence[dict], policy: str, estimates: str | None = None) -> dict | None:
    for s in summaries:
        if s["policy"] == policy and (estimates is None or s["estimates"] == estimates):
            return s
    return None


# The quality targets (issue #19's decision): a trace with several queues keeps the original three;
# on a single queue, where the order within the queue stays "priority, then age" (EASY backfill,
# as in Slurm), railforge must do no worse than strict FIFO on mean JCT, keep the big gangs' tail
# within 5 % of strict FIFO's (small buckets are noisy) and stay within 2 points of best-effort
# FIFO's utilisation. (JCT ratio bound, p99 wait ratio bound) per case:
TARGETS = {"multi-queue": (0.7, 1.0), "single-queue": (1.0, 1.05)}
UTIL_POINTS = 2.0


def queue_count(summaries: Sequence[dict]) -> int:
    """How many queues were entitled to a fair share in any run (1: a single-queue trace)."""
    return max((len(s["queue_fair_gpu_h"]) for s in summaries), default=0)


def targets_text() -> str:
    """The targets in words, for the report's heading."""
    multi, single = TARGETS["multi-queue"], TARGETS["single-queue"]
    return (
        f"Targets, several queues: railforge mean JCT <= {multi[0]:g} x strict FIFO's; p99 wait of 16+ GPU "
        f"gangs <= strict FIFO's; useful utilisation within {UTIL_POINTS:g} points of best-effort FIFO. "
        f"One queue: mean JCT <= strict FIFO's; p99 wait of 16+ GPU gangs <= {single[1]:g} x strict "
        f"FIFO's; utilisation as for several queues."
    )


def _times(bound: float) -> str:
    return "" if bound == 1 else f"{bound:g} x "


def target_checks(summaries: Sequence[dict]) -> list[tuple[str, str, bool | None]]:
    """The quality targets (``TARGETS``: by the number of queues), for every railforge run against
    the baselines (exact estimates); one row saying so when no job waited under any policy: then
    the policies cannot differ."""
    if not any(s["wait"]["n"] and s["wait"]["max"] > 0 for s in summaries):
        return [("targets", "no job waited under any policy: no contention to judge", None)]
    out: list[tuple[str, str, bool | None]] = []
    fifo = find(summaries, "strict_fifo", "exact") or find(summaries, "strict_fifo")
    be = find(summaries, "best_effort_fifo", "exact") or find(summaries, "best_effort_fifo")
    jct_bound, wait_bound = TARGETS["single-queue" if queue_count(summaries) <= 1 else "multi-queue"]
    for s in summaries:
        if s["policy"] != "railforge":
            continue
        tag = label(s)
        if fifo:
            r = s["jct"]["mean"] / fifo["jct"]["mean"]
            out.append((f"{tag}: mean JCT <= {_times(jct_bound)}strict FIFO's", f"{r:.2f} x", r <= jct_bound))
            a = s["by_bucket"]["16+"]["wait"]["p99"]
            b = fifo["by_bucket"]["16+"]["wait"]["p99"]
            ok = None if math.isnan(a) or math.isnan(b) else a <= wait_bound * b
            name = f"{tag}: p99 wait 16+ <= {_times(wait_bound)}strict FIFO's"
            out.append((name, f"{hours(a)} h vs {hours(b)} h", ok))
        if be:
            d = 100 * (s["util_useful"] - be["util_useful"])
            name = f"{tag}: useful utilisation within {UTIL_POINTS:g} points of best-effort"
            out.append((name, f"{d:+.1f} points", d >= -UTIL_POINTS))
    return out


def unfinished_md(summaries: Sequence[dict]) -> str:
    """Jobs left out of the statistics because they never finished, with the scheduler's last reason
    for those still waiting (most common reasons first)."""
    lines = []
    for s in summaries:
        if not s["unfinished"]:
            continue
        counts = list(s["unfinished_reasons"].items())
        reasons = "; ".join(f"{n:,} x {reason or 'requeued by the last pass'}" for reason, n in counts[:3])
        more = f"; {len(counts) - 3} other reasons" if len(counts) > 3 else ""
        lines.append(f"* {label(s)}: {s['unfinished']:,} never finished (left out above). Waiting: {reasons}{more}.")
    return "\n".join(lines)


def queue_share_md(summaries: Sequence[dict]) -> str:
    """Per queue and policy, GPU-hours received over those its fair share entitled it to (the
    ratios the Jain index is taken over); empty for a single queue. Queues are sorted by their
    entitlement under the first policy, shown beside the name."""
    first = summaries[0]["queue_fair_gpu_h"] if summaries else {}
    if len(first) < 2:
        return ""
    head = "| queue (fair share, GPU-h) | " + " | ".join(label(s) for s in summaries) + " |"
    lines = [head, "|---|" + "---:|" * len(summaries)]
    for queue, entitled in sorted(first.items(), key=lambda item: -item[1]):
        ratios = [s["queue_ratio"].get(queue) for s in summaries]
        cells = " | ".join("-" if r is None else f"{r:.2f} x" for r in ratios)
        lines.append(f"| {queue} ({entitled:,.0f}) | {cells} |")
    note = (
        "GPU-hours each queue received / GPU-hours of its fair share over the arrival window (the "
        "ratios of the Jain index); fair share as entitled under the first policy."
    )
    return "\n".join([note, "", *lines])


def checks_headline(checks) -> str:
    """How many targets were met, of those that could be judged (``ok`` None: not applicable)."""
    verdicts = [ok for _, _, ok in checks]
    applicable = [ok for ok in verdicts if ok is not None]
    met = sum(1 for ok in applicable if ok)
    if len(applicable) == len(verdicts):
        return f"{met} of {len(verdicts)} met."
    return f"{met} of {len(applicable)} applicable met, {len(verdicts) - len(applicable)} not applicable."


def checks_md(checks) -> str:
    mark = {True: "met", False: "**MISSED**", None: "n/a"}
    lines = ["| target | value | |", "|---|---:|---|"]
    lines += [f"| {n} | {v} | {mark[ok]} |" for n, v, ok in checks]
    return "\n".join(lines)


def trace_section(
    title: str, results: Sequence[SimResult], summaries: Sequence[dict], plot_dir: str, rel: str, notes=""
) -> str:
    files = write_plots(results, summaries, plot_dir, title)
    unfinished = unfinished_md(summaries)
    shares = queue_share_md(summaries)
    img = {k: f"{rel}/{v}" if rel else v for k, v in files.items()}
    parts = [
        f"## {title}",
        "",
        notes,
        "",
        "Times in hours unless marked.",
        "",
        TABLE_HEAD,
        table_rows(summaries),
        "",
        *([unfinished, ""] if unfinished else []),
        checks_md(target_checks(summaries)),
        "",
        *([shares, ""] if shares else []),
        f"![JCT CDF]({img['jct_cdf']})",
        f"![wait by size]({img['wait_by_bucket']})",
        "",
        f"![utilisation]({img['utilization']})",
        f"![queue depth]({img['queue_depth']})",
        "",
    ]
    return "\n".join(parts)


def write_single_report(
    out_dir: str, title: str, results: Sequence[SimResult], header: str = "", notes: str = ""
) -> str:
    """One trace, several policies: ``out_dir/report.md`` + PNGs + ``summary.json``."""
    os.makedirs(out_dir, exist_ok=True)
    summaries = [summarise(r) for r in results]
    body = trace_section(title, results, summaries, out_dir, "", notes)
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as fh:
        fh.write(f"# Simulation: {title}\n\n{header}\n\n{body}")
    with open(os.path.join(out_dir, "summary.json"), "w") as fh:
        json.dump(summaries, fh, indent=1, default=float)
    return path
