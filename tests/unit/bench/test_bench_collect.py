"""The CPU fallback's allreduce parser and verdict, the report writer (JSON, Markdown, PNG) and validate's join of
the checks with the newest benchmark report."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from benchdata import read_body

from railforge.bench.collect import COLOURS, node_summary, pod_state, write_report
from railforge.bench.errors import ParseError
from railforge.bench.floors import load_floors
from railforge.bench.judge import judge_mpi, rail_suspects
from railforge.bench.mpi import parse_mpi_allreduce
from railforge.validate import joined, report

PODS = {"bench-worker-0": "node-a", "bench-worker-1": "node-b"}
SIZE = 8388608


def allreduce_log(seconds=(0.0031, 0.0042), results=("ok", "ok"), size=SIZE, iterations=20) -> str:
    """A launcher log in allreduce.c's format (deploy/openmpi), its summary computed as the program computes it."""
    lines = ["Warning: Permanently added ... (a line of ssh, ignored)"]
    for rank, (pod, verdict, time_s) in enumerate(zip(PODS, results, seconds, strict=True)):
        lines.append(f"rank={rank} host={pod} bytes={size} result={verdict} time_s={time_s:.6f}")
    slowest, ranks = max(seconds), len(seconds)
    algbw = size / slowest / 1e9
    busbw = algbw * 2 * (ranks - 1) / ranks
    overall = "ok" if all(v == "ok" for v in results) else "FAIL"
    lines.append(
        f"summary ranks={ranks} bytes={size} iterations={iterations} time_s={slowest:.6f} algbw_GBps={algbw:.3f} "
        f"busbw_GBps={busbw:.3f} result={overall}"
    )
    return "\n".join(lines) + "\n"


def cpu_class(floor: float | None = None):
    overrides = None
    if floor is not None:
        overrides = {
            "cpu-fallback": {"floors": {"mpi_allreduce": {"busbw_gbps": floor, "message_bytes": SIZE, "source": "t"}}}
        }
    return load_floors("cpu-fallback", overrides)


def test_the_ranks_are_mapped_to_their_nodes_and_the_summary_read():
    run = parse_mpi_allreduce(allreduce_log(), "launcher.log", PODS)
    assert [(r.rank, r.pod, r.node, r.ok) for r in run.ranks] == [
        (0, "bench-worker-0", "node-a", True),
        (1, "bench-worker-1", "node-b", True),
    ]
    assert run.hosts == ("node-a", "node-b") and run.label == "mpi_allreduce 1x2"
    assert run.size_bytes == SIZE and run.iterations == 20 and run.ok
    assert run.busbw_gbps == pytest.approx(SIZE / 0.0042 / 1e9, abs=0.001)
    one_node = parse_mpi_allreduce(allreduce_log(), "launcher.log", dict.fromkeys(PODS, "node-a"))
    assert one_node.label == "mpi_allreduce 2x1"


def test_a_log_without_its_summary_or_with_ranks_missing_is_refused_by_name():
    cut = allreduce_log().rsplit("summary", 1)[0]
    with pytest.raises(ParseError, match=r"launcher.log: expected allreduce's 'summary ranks=...' line"):
        parse_mpi_allreduce(cut, "launcher.log")
    dropped = "\n".join(line for line in allreduce_log().splitlines() if not line.startswith("rank=1"))
    with pytest.raises(ParseError, match="expected 2 rank lines before the summary, found '1 rank lines'"):
        parse_mpi_allreduce(dropped, "launcher.log")


def test_the_verdict_names_the_floor_the_run_missed_and_the_ranks_that_summed_wrong():
    run = parse_mpi_allreduce(allreduce_log(), "l", PODS)
    (info,) = judge_mpi(run, cpu_class())
    assert (info.status, info.check, info.nodes) == ("info", "mpi_allreduce", ("node-a", "node-b"))
    assert "no floor for cpu-fallback" in info.message
    (fail,) = judge_mpi(run, cpu_class(floor=1e6))
    assert fail.status == "fail"
    assert fail.message == f"mpi_allreduce 1x2: {run.busbw_gbps:g} GB/s bus bandwidth at 8 MiB < 1e+06 GB/s floor"
    (met,) = judge_mpi(run, cpu_class(floor=run.busbw_gbps / 2))
    assert met.status == "pass"
    wrong = parse_mpi_allreduce(allreduce_log(results=("ok", "FAIL")), "l", PODS)
    verdicts = judge_mpi(wrong, cpu_class())
    assert verdicts[0].status == "fail" and verdicts[0].message == "mpi_allreduce 1x2: wrong sums on rank 1 (node-b)"


def results_dir(
    tmp_path: Path, state: str = "Succeeded", log: str | None = None, unfinished: dict | None = None
) -> Path:
    results = tmp_path / "results"
    (results / "outputs" / "node-b").mkdir(parents=True)
    pods = {**PODS, "bench-launcher-x": "node-a"}
    jobs = {
        "mpijobs": [{"name": "bench", "state": state, "seconds": 12.5, "pods": pods, "unfinished": unfinished or {}}]
    }
    jobs["perftest"] = {"pt-r0-node-b-client": {"node": "node-b", "phase": "Succeeded"}}
    (results / "jobs.json").write_text(json.dumps(jobs))
    (results / "outputs" / "bench-launcher.log").write_text(allreduce_log() if log is None else log)
    perftest = read_body("perftest/ib_write_bw-a-report_gbits-roce-200g-k8s-pod-client.txt")
    (results / "outputs" / "node-b" / "pt-r0-node-b-client.txt").write_text(perftest)
    return results


NOW = datetime(2026, 11, 24, 17, 5, 9, tzinfo=UTC)


def test_the_report_is_written_as_json_markdown_and_a_png(tmp_path):
    hw = load_floors("l40s-roce-200g", {"l40s-roce-200g": {"floors": {"ib_write_bw": {"bw_avg_gbps": 500}}}})
    written = write_report(results_dir(tmp_path), "forge-a", hw, tmp_path / "reports", NOW)
    assert written.json_path == tmp_path / "reports/benchmark-forge-a-20261124T170509Z.json"
    document = json.loads(written.json_path.read_text())
    assert document["cluster"] == "forge-a" and document["created"] == "2026-11-24T17:05:09+00:00"
    (run,) = document["results"]["mpi"]
    assert run["size_bytes"] == SIZE and [r["node"] for r in run["ranks"]] == ["node-a", "node-b"]
    ((node, perftest),) = document["results"]["perftest"]
    assert node == "node-b"
    device = perftest["parameters"]["Device"]
    rail_verdict = next(v for v in document["verdicts"] if v["check"] == "ib_write_bw")
    assert rail_verdict["status"] == "fail" and rail_verdict["limit"] == 500
    assert document["failed"] == [rail_verdict["message"]]
    assert rail_verdict["message"].startswith(f"node node-b rail {device}: ")
    assert document["nodes"]["node-b"]["verdict"] == "fail"
    assert document["nodes"]["node-b"]["rails"] == [device]
    assert document["nodes"]["node-a"]["verdict"] == "info"  # the allreduce has no floor in this class
    markdown = written.markdown_path.read_text()
    assert "**FAILED**: 1 failed" in markdown and f"- {rail_verdict['message']}" in markdown
    assert "| MPIJob bench | Succeeded | bench-launcher-x (node-a), bench-worker-0 (node-a)" in markdown
    assert f"![bus bandwidth, rails and scaling]({written.plot_path.name})" in markdown
    assert written.plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and written.plot_path.stat().st_size > 10000
    assert png_width(written.plot_path) == 1200  # all_reduce and perftest: two panels
    # the rail's bar in its verdict's colour: red, as it failed its floor (green is for a pass)
    assert colour_share(written.plot_path, COLOURS["fail"]) > 0.05
    assert colour_share(written.plot_path, COLOURS["pass"]) == 0
    # the allreduce's point, which no floor judges, is grey like an unjudged bar, not matplotlib's first colour
    assert colour_share(written.plot_path, "tab:blue") == 0
    assert "ResNet-50 scaling" not in markdown


def colour_share(path: Path, colour: str) -> float:
    """The share of the image's pixels in ``colour`` (a matplotlib colour name)."""
    import matplotlib.colors
    import matplotlib.image
    import numpy

    pixels = matplotlib.image.imread(path)[..., :3]
    wanted = numpy.array(matplotlib.colors.to_rgb(colour))
    return float(numpy.all(numpy.abs(pixels - wanted) < 0.02, axis=-1).mean())


def png_width(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[16:20], "big")  # IHDR's width


def test_the_resnet50_runs_make_a_scaling_table_and_panel(tmp_path):
    results = results_dir(tmp_path)
    for job, ranks, rate in (("bench-resnet50", 2, 10.2), ("bench-resnet50-w1", 1, 6.0)):
        (results / "outputs" / f"{job}-launcher.log").write_text(
            f"railforge-resnet50: result images_per_sec={rate} gpus=0 ranks={ranks} nodes=1 batch_per_gpu=4 "
            "device=cpu steps=5\n"
        )
    written = write_report(results, "forge-a", cpu_class(), tmp_path / "reports", NOW)
    document = json.loads(written.json_path.read_text())
    (scaling,) = [v for v in document["verdicts"] if v["check"] == "resnet50_scaling"]
    assert (scaling["status"], scaling["measured"], scaling["unit"]) == ("info", 0.85, "of linear")
    assert scaling["message"].startswith(
        "resnet50 2 CPU ranks on 1 node: 0.85 of linear scaling efficiency vs 1 CPU rank"
    )
    markdown = written.markdown_path.read_text()
    table = markdown[markdown.index("## ResNet-50 scaling") :].splitlines()
    assert table[2:6] == [
        "| CPU ranks, batch 4 | nodes | images/s | per process | of linear |",
        "| ---: | ---: | ---: | ---: | ---: |",
        "| 1 | 1 | 6 | 6 | 1.00 |",
        "| 2 | 1 | 10.2 | 5.1 | 0.85 |",
    ]
    assert png_width(written.plot_path) == 1700  # a third panel: images/s against ranks


def test_a_job_that_did_not_succeed_or_left_no_output_fails_the_report(tmp_path):
    failed = write_report(results_dir(tmp_path, state="Failed", log=""), "c", cpu_class(), tmp_path / "r", NOW)
    assert failed.failures[0] == "MPIJob bench: Failed"
    assert set(failed.verdicts[0].nodes) == {"node-a", "node-b"}
    cut = write_report(results_dir(tmp_path / "2", log="rank=0 host=x bytes=8 result=ok time_s=1.0\n"), "c",
                       cpu_class(), tmp_path / "r2", NOW)  # fmt: skip
    assert any("expected allreduce's 'summary ranks=...' line" in message for message in cut.failures)
    stuck = {"bench-worker-1": "Pending on no node: Unschedulable 1 of 3 fit"}
    timed_out = write_report(results_dir(tmp_path / "3", state="not ended after 600 s", unfinished=stuck), "c",
                             cpu_class(), tmp_path / "r4", NOW)  # fmt: skip
    assert timed_out.failures[0] == (
        "MPIJob bench: not ended after 600 s; bench-worker-1 Pending on no node: Unschedulable 1 of 3 fit"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = write_report(empty, "c", cpu_class(), tmp_path / "r3", NOW)
    assert nothing.failures == ["benchmark output: no result to judge"]


def pod(phase: str, node: str = "", containers: tuple = (), conditions: tuple = ()) -> dict:
    """A Pod as the API serves it, with only the fields pod_state reads."""
    status = {"phase": phase, "containerStatuses": list(containers), "conditions": list(conditions)}
    return {"metadata": {"name": "p"}, "spec": {"nodeName": node} if node else {}, "status": status}


def test_a_pod_left_behind_says_what_holds_it():
    unbound = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "gang needs 3 nodes"}
    assert pod_state(pod("Pending", conditions=(unbound,))) == "Pending on no node: Unschedulable gang needs 3 nodes"
    pulling = {"name": "worker", "state": {"waiting": {"reason": "ErrImageNeverPull", "message": "image not present"}}}
    assert (
        pod_state(pod("Pending", "n1", (pulling,)))
        == "Pending on n1, worker waiting: ErrImageNeverPull image not present"
    )
    crashed = {"name": "launcher", "state": {"terminated": {"reason": "Error", "exitCode": 137}}}
    assert pod_state(pod("Failed", "n2", (crashed,))) == "Failed on n2, launcher ended: Error (exit 137)"
    running = {"name": "launcher", "state": {"running": {"startedAt": "2026-11-29T00:35:00Z"}}}
    assert pod_state(pod("Running", "n2", (running,))) == "Running on n2"


def checks(failed: dict | None = None) -> dict:
    return {"passed": ["test_gpus", "test_rails"], "failed": failed or {}, "skipped": {}}


def test_validate_joins_checks_rails_bandwidth_and_verdict_per_node(tmp_path, capsys):
    hw = load_floors("l40s-roce-200g")
    reports = tmp_path / "reports"
    write_report(results_dir(tmp_path), "forge-a", hw, reports, NOW)
    nodes = {"node-a": checks(), "node-b": checks(), "node-c": checks({"test_driver": "no nvidia module"})}
    args = argparse.Namespace(
        benchmark=reports, cluster="forge-a", json_path=str(tmp_path / "validate.json"), quarantine="off"
    )
    status = report(nodes, args)
    out = capsys.readouterr().out
    rows = json.loads((tmp_path / "validate.json").read_text())["nodes"]
    assert status == 1  # node-c's check failed; the benchmark met its floors
    assert rows["node-b"]["verdict"] == "PASS"
    assert [b.rsplit(" ", 1)[1] for b in rows["node-b"]["bandwidth"]] == ["GB/s", "Gb/s"]  # allreduce, its rail
    assert rows["node-c"]["verdict"] == "FAIL" and rows["node-c"]["failed"] == ["check test_driver"]
    assert rows["node-a"]["rails"] == [] and any("GB/s" in b for b in rows["node-a"]["bandwidth"])
    assert out.count("| node-") == 3 and "| node | checks | rails | bandwidth | verdict | failed |" in out

    # a newer report with a floor missed: the node that missed it fails, and so does the exit status
    strict = load_floors("l40s-roce-200g", {"l40s-roce-200g": {"floors": {"ib_write_bw": {"bw_avg_gbps": 500}}}})
    later = NOW.replace(minute=30)
    write_report(results_dir(tmp_path / "later"), "forge-a", strict, reports, later)
    healthy = {"node-a": checks(), "node-b": checks()}
    assert report(healthy, args) == 1
    rows = json.loads((tmp_path / "validate.json").read_text())["nodes"]
    assert rows["node-b"]["verdict"] == "FAIL" and "< 500 Gb/s floor" in rows["node-b"]["failed"][0]
    assert rows["node-a"]["verdict"] == "PASS"
    assert "benchmark-forge-a-20261124T173009Z.json" in capsys.readouterr().out

    # a still newer report of another cluster whose name starts alike is not forge-a's
    write_report(results_dir(tmp_path / "other"), "forge-a-b", hw, reports, NOW.replace(minute=45))
    assert report(healthy, args) == 1
    assert "benchmark-forge-a-20261124T173009Z.json" in capsys.readouterr().out
    assert (
        report(healthy, argparse.Namespace(benchmark=reports, cluster=None, json_path=None, quarantine="off")) == 0
    )  # newest of any
    assert "benchmark-forge-a-b-20261124T174509Z.json" in capsys.readouterr().out


def test_a_failure_naming_no_node_fails_every_node_and_no_report_means_checks_only(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    document_path = write_report(empty, "c", cpu_class(), tmp_path / "reports", NOW).json_path
    rows = joined({"n1": checks()}, json.loads(document_path.read_text()))
    assert rows["n1"]["verdict"] == "FAIL" and rows["n1"]["failed"] == ["benchmark output: no result to judge"]
    args = argparse.Namespace(benchmark=tmp_path / "nowhere-yet", cluster="c", json_path=None, quarantine="off")
    # a fresh checkout has no reports directory until a benchmark runs: checks only, as with an empty one
    assert report({"n1": checks()}, args) == 0
    assert "no benchmark report of c in" in capsys.readouterr().out
    (tmp_path / "nowhere-yet").mkdir()
    assert report({"n1": checks()}, args) == 0
    assert "no benchmark report of c in" in capsys.readouterr().out
    assert node_summary([]) == {}


def test_a_ring_of_perftest_pairs_names_the_node_in_every_failed_pair(tmp_path):
    """Three nodes in a ring (a serves b, b serves c, c serves a) and node-b's port slow: its two pairs fail, the
    third passes; the client node-c is named with its server, and node-b as the likely fault."""
    results = tmp_path / "results"
    body = read_body("perftest/ib_write_bw-a-report_gbits-roce-200g-k8s-pod-client.txt")
    slow = body.replace(
        " 8388608    5000             196.07             196.07",
        " 8388608    5000              96.07              96.07",
    )
    assert slow != body
    ring = {"node-b": ("node-a", slow), "node-c": ("node-b", slow), "node-a": ("node-c", body)}
    perftest = {}
    for client, (server, text) in ring.items():
        pod = f"pt-ib-write-bw-r0-{client}-client"
        (results / "outputs" / client).mkdir(parents=True)
        (results / "outputs" / client / f"{pod}.txt").write_text(text)
        perftest[pod] = {"node": client, "phase": "Succeeded", "server": server}
    (results / "jobs.json").write_text(json.dumps({"mpijobs": [], "perftest": perftest}))
    hw = load_floors("l40s-roce-200g", {"l40s-roce-200g": {"floors": {"ib_write_bw": {"bw_avg_gbps": 150}}}})
    written = write_report(results, "forge-a", hw, tmp_path / "reports", NOW)
    assert written.failures == [
        "node node-b rail mlx5_0: 96.07 Gb/s ib_write_bw at 8 MiB, host memory, server node-a < 150 Gb/s floor",
        "node node-c rail mlx5_0: 96.07 Gb/s ib_write_bw at 8 MiB, host memory, server node-b < 150 Gb/s floor",
        "node node-b rail mlx5_0: in each of the 2 failed ib_write_bw pairs on this rail, the likely fault",
    ]
    nodes = json.loads(written.json_path.read_text())["nodes"]
    assert (nodes["node-a"]["verdict"], len(nodes["node-b"]["failed"]), len(nodes["node-c"]["failed"])) == (
        "pass",
        2,
        1,
    )
    pod = "pt-ib-write-bw-r0-node-c-client"
    assert f"| perftest {pod} | Succeeded | {pod} (node-c), its server (node-b) |" in written.markdown_path.read_text()
    # two nodes: both pairs hold both nodes, so neither is named
    two = {v.nodes[0]: v for v in written.verdicts if v.check == "ib_write_bw"}
    assert rail_suspects([(two["node-b"], "node-c"), (two["node-c"], "node-b")]) == []
