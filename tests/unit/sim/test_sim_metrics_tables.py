from __future__ import annotations

import json
import math
import os
import shutil

import matplotlib.axes
import numpy as np
import pytest

from railforge.cli import main
from railforge.sim.metrics import (
    JobOutcome,
    SimResult,
    jain_index,
    size_bucket,
    summarise,
    time_weighted_mean,
)
from railforge.sim.tables import binned, checks_headline, target_checks, write_plots, write_single_report


def tiny_result(policy="p") -> SimResult:
    jobs = [
        # submit, runtime, start, end: JCT 100, 140, 30 and 300 (one eviction lost 50 s)
        JobOutcome("a", "q1", 1, 0, 100, first_start=0, end=100, starts=1),
        JobOutcome("b", "q1", 4, 10, 50, first_start=100, end=150, starts=1),
        JobOutcome("c", "q2", 16, 20, 30, first_start=20, end=50, starts=1),
        JobOutcome("d", "q2", 8, 0, 200, first_start=0, end=300, starts=2, evictions=1),
    ]
    series = [(0, 9, 2, 2), (20, 25, 1, 3), (100, 12, 0, 2), (300, 0, 0, 0)]
    return SimResult(
        "tiny",
        policy,
        "exact",
        32,
        jobs,
        (0, 20),
        series,
        queue_alloc={"q1": 100.0, "q2": 200.0},
        queue_fair={"q1": 100.0, "q2": 100.0},
        counters={"backfills": 2, "reclaims": 1},
    )


def test_summary_hand_computed():
    s = summarise(tiny_result())
    assert s["jct"]["mean"] == pytest.approx((100 + 140 + 30 + 300) / 4)
    assert s["jct"]["median"] == pytest.approx((100 + 140) / 2)
    assert s["jct"]["max"] == 300
    # waits: 0, 90, 0, 100 (d: 300 - 0 - 200)
    assert s["wait"]["mean"] == pytest.approx(190 / 4)
    assert s["longest_wait"] == 100 and s["longest_wait_job"] == "d"
    assert s["by_bucket"]["1"]["jct"]["mean"] == 100
    assert s["by_bucket"]["2-8"]["wait"]["mean"] == pytest.approx(95)
    assert s["by_bucket"]["16+"]["jct"]["p99"] == 30
    assert s["makespan"] == 300
    # window [0, 20]: the exact per-queue integrals, 300 GPU-s of 32 x 20
    assert s["util"] == pytest.approx(300 / 640)
    assert s["util_makespan"] == pytest.approx((9 * 20 + 25 * 80 + 12 * 200) / 300 / 32)
    assert s["queue_ratio"] == {"q1": 1.0, "q2": 2.0}
    assert s["jain"] == pytest.approx(9 / (2 * 5))
    assert s["counters"]["reclaims"] == 1


def test_helpers():
    assert [size_bucket(g) for g in (1, 2, 8, 12, 16, 128)] == ["1", "2-8", "2-8", "16+", "16+", "16+"]
    assert jain_index([1, 1, 1]) == pytest.approx(1.0)
    assert jain_index([1, 0]) == pytest.approx(0.5)
    assert math.isnan(jain_index([]))
    series = [(0, 4, 0, 0), (10, 8, 0, 0)]
    assert time_weighted_mean(series, 0, 20) == pytest.approx(6)
    assert time_weighted_mean(series, 5, 15) == pytest.approx(6)
    assert list(binned(series, np.array([0.0, 10.0, 20.0]))) == [4, 8]


def test_single_report_writes_markdown_and_pngs(tmp_path):
    results = [tiny_result("strict_fifo"), tiny_result("railforge"), tiny_result("best_effort_fifo")]
    path = write_single_report(str(tmp_path), "tiny", results, "header", "notes")
    with open(path) as fh:
        text = fh.read()
    assert "| railforge (exact) |" in text and "mean JCT <= 0.7 x strict FIFO's" in text
    for png in ("jct_cdf.png", "wait_by_bucket.png", "utilization.png", "queue_depth.png"):
        assert (tmp_path / png).stat().st_size > 5000
        assert f"]({png})" in text
    assert json.loads((tmp_path / "summary.json").read_text())[0]["policy"] == "strict_fifo"


@pytest.mark.parametrize(
    ("span", "bins"),
    [
        (0.0, "mean per 1 s"),  # no job started: one bin
        (1.5 * 3600.0, "mean per 54 s"),
        (10 * 3600.0, "mean per 6 min"),
        (4 * 86400.0, "mean per 57.6 min"),
        (10 * 86400.0, "daily mean"),
    ],
)
def test_over_time_plots_name_the_bins_they_average(tmp_path, monkeypatch, span, bins):
    """A run of a few hours is binned in hundredths of its span, one of more than four days by day:
    each over-time plot's title says which."""
    titles = []
    monkeypatch.setattr(matplotlib.axes.Axes, "set_title", lambda ax, text, *a, **k: titles.append(text))
    result = tiny_result()
    result.series = [(0.0, 8, 1, 1), (span / 2, 16, 0, 2), (span, 0, 0, 0)]
    write_plots([result], [summarise(result)], str(tmp_path), "tiny")
    assert f"tiny: GPU utilisation ({bins})" in titles
    assert f"tiny: pending gangs ({bins})" in titles


def test_targets_follow_the_number_of_queues():
    """Several queues: mean JCT <= 0.7 x strict FIFO's, p99 wait of 16+ gangs <= strict FIFO's; one
    queue: mean JCT <= strict FIFO's, p99 wait of 16+ gangs <= 1.05 x strict FIFO's. Utilisation
    within 2 points of best-effort FIFO either way."""
    fifo, best_effort, ours = (summarise(tiny_result(p)) for p in ("strict_fifo", "best_effort_fifo", "railforge"))
    ours["jct"] = {**ours["jct"], "mean": 0.9 * fifo["jct"]["mean"]}
    wait_16 = fifo["by_bucket"]["16+"]["wait"]["p99"] = 100.0
    ours["by_bucket"] = {**ours["by_bucket"], "16+": {**ours["by_bucket"]["16+"], "wait": {"p99": 1.04 * wait_16}}}
    ours["util_useful"] = best_effort["util_useful"] - 0.019

    def verdicts(queues: dict) -> list[tuple[str, bool]]:
        for summary in (fifo, best_effort, ours):
            summary["queue_fair_gpu_h"] = queues
        return [(name.split(": ", 1)[1], ok) for name, _, ok in target_checks([fifo, best_effort, ours])]

    assert verdicts({"q1": 1.0, "q2": 1.0}) == [
        ("mean JCT <= 0.7 x strict FIFO's", False),
        ("p99 wait 16+ <= strict FIFO's", False),
        ("useful utilisation within 2 points of best-effort", True),
    ]
    assert verdicts({"q1": 1.0}) == [
        ("mean JCT <= strict FIFO's", True),
        ("p99 wait 16+ <= 1.05 x strict FIFO's", True),
        ("useful utilisation within 2 points of best-effort", True),
    ]
    ours["by_bucket"]["16+"]["wait"]["p99"] = 1.06 * wait_16
    assert ("p99 wait 16+ <= 1.05 x strict FIFO's", False) in verdicts({"q1": 1.0})


def test_report_shows_each_queues_share_against_its_fair_share(tmp_path):
    # tiny_result: q1 received 100 of 100 fair GPU-seconds, q2 200 of 100
    s = summarise(tiny_result())
    assert s["queue_fair_gpu_h"] == {"q1": pytest.approx(100 / 3600), "q2": pytest.approx(100 / 3600)}
    path = write_single_report(str(tmp_path), "tiny", [tiny_result("railforge"), tiny_result("strict_fifo")])
    with open(path) as fh:
        text = fh.read()
    assert "| queue (fair share, GPU-h) | railforge (exact) | strict_fifo (exact) |" in text
    assert "| q1 (0) | 1.00 x | 1.00 x |" in text and "| q2 (0) | 2.00 x | 2.00 x |" in text
    single = tiny_result()
    single.queue_fair = {"q1": 100.0}
    with open(write_single_report(str(tmp_path), "one", [single])) as fh:
        assert "fair share, GPU-h" not in fh.read()


def test_report_lists_unfinished_jobs_with_their_reasons(tmp_path):
    res = tiny_result("railforge")
    res.jobs.append(JobOutcome("e", "q1", 64, 5, 10))
    res.jobs.append(JobOutcome("f", "q1", 64, 6, 10))
    res.unfinished = {"e": "needs 64 GPUs", "f": "needs 64 GPUs"}
    assert summarise(res)["unfinished_reasons"] == {"needs 64 GPUs": 2}
    path = write_single_report(str(tmp_path), "tiny", [res, tiny_result("strict_fifo")])
    with open(path) as fh:
        text = fh.read()
    assert "* railforge (exact): 2 never finished (left out above). Waiting: 2 x needs 64 GPUs." in text
    assert "* strict_fifo" not in text  # every job finished


def test_cli_simulate_end_to_end(tmp_path, traces_dir):
    out = tmp_path / "r"
    rc = main(
        [
            "simulate",
            "--trace",
            "itp:cluster01",
            "--traces-dir",
            str(traces_dir),
            "--max-jobs",
            "120",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    text = (out / "report.md").read_text()
    rows = ("railforge (exact)", "railforge (user)", "strict_fifo (n/a)", "best_effort_fifo", "sjf_oracle")
    for row in rows:
        assert row in text
    assert len(list(out.glob("*.png"))) == 4


def test_cli_report_end_to_end(tmp_path, traces_dir):
    doc = tmp_path / "docs" / "simulation-results.md"
    rc = main(
        [
            "simulate-report",
            "--traces",
            f"philly,csv:{traces_dir / 'generic.csv'}",
            "--traces-dir",
            str(traces_dir),
            "--policies",
            "railforge,strict_fifo,best_effort_fifo",
            "--estimates",
            "exact",
            "--max-jobs",
            "150",
            "--failures",
            "0.5",
            "--doc",
            str(doc),
            "--cache",
            str(tmp_path / "cache"),
            "--no-progress",
        ]
    )
    assert rc == 0
    text = doc.read_text()
    assert len(list((tmp_path / "cache").glob("*.pickle"))) == 6  # 2 traces x 3 policies
    assert text.startswith("# Simulation results")
    assert "python -m railforge.cli simulate-report --traces philly," in text
    assert "--failures 0.5" in text
    assert (tmp_path / "docs" / "simulation-results" / "philly" / "jct_cdf.png").exists()
    assert "](simulation-results/generic/queue_depth.png)" in text
    overview = text.split("## Overview", 1)[1].split("\n## ", 1)[0]
    assert "| util | useful util | Jain |" in overview  # allocated, and net of runs cut short
    rows = [line for line in overview.splitlines() if line.startswith(("| philly |", "| generic |"))]
    assert len(rows) == 6 and all(row.count("%") == 2 for row in rows)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policies", "lottery"], "unknown preset 'lottery'; known: best_effort_fifo,"),
        (["--set", "reservation_depth=0"], "SchedulerConfig: reservation_depth is 0; expected >= 1"),
        (["--set", "restart_backoff_base=7200"], "restart_backoff_max is 3600.0; expected >= restart_backoff_base"),
    ],
)
def test_cli_refuses_unknown_policies_and_settings_before_running(traces_dir, extra, message, capsys):
    args = ["simulate", "--trace", "itp:cluster01", "--traces-dir", str(traces_dir), "--out", "/nonexistent", *extra]
    assert main(args) == 2
    refusal = capsys.readouterr().err
    assert refusal.startswith("railforge simulate: ") and message in refusal and refusal.count("\n") == 1


@pytest.mark.parametrize(
    ("trace", "rows", "extra", "message"),
    [
        ("csv", "0,3600,8\n", ["--estimates", "exact,guess"], "unknown estimate model 'guess': use one of exact, user"),
        (
            "csv",
            "0,3600,8\n10,abc,1\n",
            [],
            "{dir}/jobs.csv, line 3: duration is 'abc'; expected a number of seconds >= 0",
        ),
        ("csv", "0,3600,8\n10,60,1.5\n", [], "{dir}/jobs.csv, line 3: gpus is '1.5'; expected a whole number >= 0"),
        ("csv", "-1,3600,8\n", [], "{dir}/jobs.csv, line 2: submit is '-1'; expected a number of seconds >= 0"),
        ("csv", "", [], "{dir}/jobs.csv: no jobs (a header row and no data rows); expected at least one job row"),
        ("missing", "", [], "trace csv:{dir}/missing.csv: no file {dir}/missing.csv"),
        ("binary", "", [], "trace csv:{dir}/binary.csv: not UTF-8 text; expected a CSV file"),
        ("directory", "", [], "trace csv:{dir}: {dir} is a directory; expected a CSV file"),
        ("itp:cluster99", "", [], "trace itp:cluster99: no file {traces}/elasticflow-itp/raw/cluster99.csv"),
        ("lottery", "", [], "unknown trace 'lottery': use philly, itp:clusterNN or csv:PATH"),
    ],
)
def test_cli_refuses_bad_input_in_one_line(tmp_path, traces_dir, trace, rows, extra, message, capsys):
    (tmp_path / "jobs.csv").write_text("submit,duration,gpus\n" + rows)
    (tmp_path / "binary.csv").write_bytes(bytes(range(128, 256)))
    spec = {
        "csv": f"csv:{tmp_path}/jobs.csv",
        "missing": f"csv:{tmp_path}/missing.csv",
        "binary": f"csv:{tmp_path}/binary.csv",
        "directory": f"csv:{tmp_path}",
    }.get(trace, trace)
    args = ["simulate", "--trace", spec, "--traces-dir", str(traces_dir), "--out", str(tmp_path / "out"), *extra]
    assert main([*args, "--no-progress"]) == 2
    assert capsys.readouterr().err == f"railforge simulate: {message.format(dir=tmp_path, traces=traces_dir)}\n"
    assert not (tmp_path / "out").exists()


def test_a_run_without_contention_says_so_instead_of_missing_targets(tmp_path):
    calm = tmp_path / "calm.csv"
    calm.write_text("submit,duration,gpus\n0,3600,1\n100,600,1\n")
    out = tmp_path / "out"
    assert main(["simulate", "--trace", f"csv:{calm}", "--out", str(out), "--no-progress"]) == 0
    report = (out / "report.md").read_text()
    assert "| targets | no job waited under any policy: no contention to judge | n/a |" in report
    assert "MISSED" not in report and " met |" not in report


def test_cli_report_cached_only_lists_missing_runs(tmp_path, traces_dir):
    doc = tmp_path / "doc.md"
    base = ["simulate-report", "--traces", "philly", "--traces-dir", str(traces_dir), "--max-jobs", "60"]
    base += ["--estimates", "exact", "--cache", str(tmp_path / "c"), "--doc", str(doc), "--no-progress"]
    assert main([*base, "--policies", "strict_fifo"]) == 0
    assert main([*base, "--policies", "strict_fifo,best_effort_fifo", "--cached-only"]) == 0
    text = doc.read_text()
    assert "| strict_fifo (n/a) |" in text
    assert "missing here:** best_effort_fifo (n/a)" in text


def test_cli_set_overrides_scheduler_settings(tmp_path, traces_dir):
    # railforge with strict FIFO's settings is strict FIFO: the same numbers under another label.
    base = ["simulate", "--trace", "itp:cluster01", "--traces-dir", str(traces_dir), "--max-jobs", "120"]
    base += ["--estimates", "exact", "--no-progress"]
    settings = ["backfill=none", "order=fifo", "skip_ahead=false", "reclaim=false"]
    overridden = [*base, "--policies", "railforge", "--out", str(tmp_path / "o")]
    assert main([*overridden, *(arg for s in settings for arg in ("--set", s))]) == 0
    assert main([*base, "--policies", "strict_fifo", "--out", str(tmp_path / "s")]) == 0

    def row(folder, label):
        lines = (tmp_path / folder / "report.md").read_text().splitlines()
        return next(line for line in lines if line.startswith(f"| {label} |")).split("|")[2:]

    assert row("o", "railforge (exact)") == row("s", "strict_fifo (n/a)")
    assert "--set backfill=none" in (tmp_path / "o" / "report.md").read_text()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("orderx=fifo", "expected FIELD=VALUE with FIELD one of: aging_bound,"),
        ("order=lottery", "order=lottery: expected one of fair, fifo, sjf_oracle"),
        ("aging_bound=soon", "aging_bound=soon: expected float | None"),
        ("reclaim=1", "reclaim=1: expected true or false"),
        ("topology_level_names=leaf", "expected FIELD=VALUE with FIELD one of:"),
    ],
)
def test_cli_set_rejects_unknown_fields_and_wrong_values(traces_dir, capsys, setting, message):
    with pytest.raises(SystemExit):
        main(["simulate", "--trace", "philly", "--traces-dir", str(traces_dir), "--set", setting])
    assert message in capsys.readouterr().err


def test_cached_runs_are_keyed_by_the_scheduler_and_simulator_code(monkeypatch):
    from railforge.sim import commands
    from railforge.sim.cluster import ClusterShape
    from railforge.sim.runner import RunSpec

    spec = RunSpec("philly", "railforge", "exact", ClusterShape(nodes=2))
    assert len(commands._code_digest()) == 64  # a sha256 of the packages' source files
    monkeypatch.setattr(commands, "_code_digest", lambda: "code-a")
    first = commands.run_key(spec)
    assert first.startswith("philly-railforge-exact-") and first == commands.run_key(spec)
    monkeypatch.setattr(commands, "_code_digest", lambda: "code-b")
    assert commands.run_key(spec) != first


def test_the_headline_counts_only_applicable_targets():
    checks = [("a", "1", True), ("b", "2", False), ("c", "-", None), ("d", "-", None)]
    assert checks_headline(checks) == "1 of 2 applicable met, 2 not applicable."
    assert checks_headline([("a", "1", True), ("b", "2", True)]) == "2 of 2 met."


def test_report_rendering_does_not_key_cached_runs(tmp_path, monkeypatch):
    import railforge.scheduler
    import railforge.sim
    from railforge.sim import commands

    source = tmp_path / "railforge"
    for package in (railforge.scheduler, railforge.sim):
        shutil.copytree(os.path.dirname(package.__file__), source / package.__name__.split(".")[-1])
    monkeypatch.setattr(railforge.scheduler, "__file__", str(source / "scheduler" / "__init__.py"))
    monkeypatch.setattr(railforge.sim, "__file__", str(source / "sim" / "__init__.py"))

    def digest():
        commands._code_digest.cache_clear()
        return commands._code_digest()

    first = digest()
    for name in ("doc.py", "tables.py", "commands.py"):
        (source / "sim" / name).write_text("# rendering only\n", encoding="utf-8")
    assert digest() == first
    for part in ("sim/engine.py", "scheduler/core.py"):
        original = (source / part).read_text(encoding="utf-8")
        (source / part).write_text(original + "# changed\n", encoding="utf-8")
        assert digest() != first, part
        (source / part).write_text(original, encoding="utf-8")
    assert digest() == first
    commands._code_digest.cache_clear()
