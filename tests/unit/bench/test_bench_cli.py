"""``railforge bench judge`` over a directory laid out as the jobs will write it: DIR/<node>/<output>."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchdata import read_body

from railforge.cli import main

H200 = "nccl-tests/all_reduce_perf-2node-h200-8gpu-each-single-shared-rdma-if-ib-disabled.txt"
H100 = "nccl-tests/all_reduce_perf-2node-16xh100-ndr-cx7-slurm-srun-label-prefix-validation-off.txt"
BW200 = "perftest/ib_write_bw-a-report_gbits-roce-200g-k8s-pod-client.txt"
LAT = "perftest/ib_read_lat-roce-k8s-pod-mlx5_0-client.txt"
ONE_H200 = "nccl-tests/all_reduce_perf-1gpu-h200-nccl-2.28.9-older-nccl-tests-format.txt"
RESNET_H200 = "resnet50/railforge-resnet50-1x-h200-batch256.txt"


def write(directory: Path, relative: str, text: str) -> None:
    path = directory / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def roce_results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    write(results, "pod-2/ib_write_bw-mlx5_0.txt", read_body(BW200))
    write(results, "pod-2/ib_read_lat-mlx5_0.txt", read_body(LAT))
    write(results, "notes.md", "not an output\n")
    return results


def test_floors_met_exit_0_and_json(roce_results: Path, tmp_path: Path, capsys):
    out = tmp_path / "reports" / "bench.json"
    code = main(["bench", "judge", "--results", str(roce_results), "--class", "l40s-roce-200g", "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "| PASS | node pod-2 rail mlx5_0 | ib_write_bw | 196.07 Gb/s | 196.07 Gb/s |" in printed
    assert "| PASS | node pod-2 rail mlx5_0 | ib_read_lat | 4.83 us | 4.83 us |" in printed
    assert f"skipped (not a recognised benchmark output): {roce_results / 'notes.md'}" in printed
    data = json.loads(out.read_text())
    assert data["failed"] == 0 and len(data["verdicts"]) == 2


def test_failed_floor_exits_1_naming_node_and_rail(roce_results: Path, tmp_path: Path, capsys):
    floors = tmp_path / "group_vars.yml"
    floors.write_text(
        "railforge_benchmark_floors:\n  l40s-roce-200g:\n    floors:\n      ib_write_bw: {bw_avg_gbps: 360}\n"
    )
    code = main(
        ["bench", "judge", "--results", str(roce_results), "--class", "l40s-roce-200g", "--floors", str(floors)]
    )
    printed = capsys.readouterr().out
    assert code == 1
    assert "| FAIL | node pod-2 rail mlx5_0 | ib_write_bw | 196.07 Gb/s | 360 Gb/s |" in printed
    assert "| pod-2 | mlx5_0 | FAIL | mlx5_0 ib_write_bw |" in printed  # the per-node table
    assert printed.rstrip().endswith("1 failed, 2 verdicts")


def test_socket_fallback_run_fails_and_file_name_names_the_collective(tmp_path: Path, capsys):
    results = tmp_path / "results"
    write(results, "all_reduce_perf-h200.txt", read_body(H200))
    write(results, "all_reduce_perf-h100.txt", read_body(H100))  # the output itself does not name the binary
    assert main(["bench", "judge", "--results", str(results), "--class", "h200-sxm-cx7-ndr"]) == 1
    printed = capsys.readouterr().out
    # the verdict names the log it read: the output itself does not say which run it is
    assert (
        "| FAIL | all_reduce 8x2 | transport | - | - | - | all_reduce_perf-h200.txt | NCCL fell back to sockets"
        in printed
    )
    assert printed.count("| all_reduce 8x2 | nccl_all_reduce_multinode |") == 2


def test_one_h200s_outputs_are_reported_not_failed(tmp_path: Path, capsys):
    """The lent H200's nccl-tests run (early format: no '#' before nThread) and ResNet-50 run, as a job writes them."""
    results = tmp_path / "results"
    write(results, "all_reduce_perf-1x1.txt", read_body(ONE_H200))
    write(results, "resnet50-launcher.log", read_body(RESNET_H200))
    assert main(["bench", "judge", "--results", str(results), "--class", "h200-sxm-cx7-ndr"]) == 0
    printed = capsys.readouterr().out
    assert (
        "| INFO | all_reduce 1x1 | nccl_all_reduce_1node | 0 GB/s | - | - | all_reduce_perf-1x1.txt | one rank sends"
        in printed
    )
    assert "| INFO | resnet50 1 GPU on 1 node | resnet50_per_gpu | 2180.2 images/s per GPU |" in printed
    assert "skipped" not in printed and printed.rstrip().endswith("0 failed, 2 verdicts")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--class", "b200"], "hardware class 'b200' is not known"),
        (["--class", "h100-sxm-cx7-ndr", "--floors", "FLOORS"], "ib_write_bw.bw_avg_gbps: expected a positive number"),
    ],
)
def test_bad_input_exits_2_with_a_clear_error(roce_results: Path, tmp_path: Path, capsys, args, message):
    floors = tmp_path / "floors.yml"
    floors.write_text("h100-sxm-cx7-ndr:\n  floors:\n    ib_write_bw: {bw_avg_gbps: fast}\n")
    argv = ["bench", "judge", "--results", str(roce_results), *[str(floors) if a == "FLOORS" else a for a in args]]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_unreadable_output_exits_2_naming_file_and_line(tmp_path: Path, capsys):
    results = tmp_path / "results"
    text = read_body(BW200)
    write(results, "dgx-03/ib_write_bw.txt", text[: text.index(" 131072     5000") + 30])
    assert main(["bench", "judge", "--results", str(results), "--class", "h100-sxm-cx7-ndr"]) == 2
    assert f"{results / 'dgx-03/ib_write_bw.txt'}:40: expected a results row of 5 columns" in capsys.readouterr().err


def test_results_must_be_a_directory(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["bench", "judge", "--results", str(tmp_path / "none"), "--class", "h100-sxm-cx7-ndr"])
    assert stop.value.code == 2
    none = tmp_path / "none"
    assert (
        capsys.readouterr().err
        == f"railforge bench judge: --results: {none}: expected an existing directory, found nothing there\n"
    )
