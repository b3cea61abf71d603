"""The railforge-resnet50 line format: the lines written here, and real runs of the benchmark on a GPU
(tests/fixtures/realdata/bench/resnet50)."""

from __future__ import annotations

import re

import pytest
from benchdata import fixture_names, prefixes, read_body

from railforge.bench.errors import ParseError
from railforge.bench.resnet import parse_resnet

LOG = """\
[rank0] torch 2.5.1, NCCL 2.21.5
railforge-resnet50: step=20 images_per_sec=5611.0 gpus=16 nodes=2 batch_per_gpu=32
NCCL INFO some line that is not ours
railforge-resnet50: step=40 images_per_sec=5702.5 gpus=16 nodes=2 batch_per_gpu=32
railforge-resnet50: result images_per_sec=5688.0 gpus=16 nodes=2 batch_per_gpu=32 steps=40
"""


def test_steps_and_result():
    run = parse_resnet(LOG, "rn50.log")
    assert [(s.step, s.images_per_sec) for s in run.steps] == [(20, 5611.0), (40, 5702.5)]
    assert (run.result.images_per_sec, run.result.gpus, run.result.nodes, run.result.steps) == (5688.0, 16, 2, 40)
    assert run.result.per_process == 355.5
    assert run.label == "resnet50 16 GPUs on 2 nodes" and run.missing == ()


def test_pod_log_prefix_and_default_nodes():
    run = parse_resnet("2026-11-24T02:00:00Z railforge-resnet50: result images_per_sec=2900 gpus=8 steps=100\n")
    assert (run.result.nodes, run.result.batch_per_gpu, run.label) == (1, None, "resnet50 8 GPUs on 1 node")


def test_cpu_fallback_counts_ranks_not_gpus_and_maps_hosts_to_nodes():
    log = (
        "railforge-resnet50: step=3 images_per_sec=3.1 gpus=0 ranks=2 hosts=w0,w1 batch_per_gpu=4 device=cpu\n"
        "railforge-resnet50: result images_per_sec=3.0 gpus=0 ranks=2 hosts=w0,w1 batch_per_gpu=4 device=cpu steps=3\n"
    )
    run = parse_resnet(log, "cpu.log", {"w0": "node-a", "w1": "node-a"})
    assert run.result.on_cpu and (run.result.ranks, run.result.gpus) == (2, 0)
    assert run.label == "resnet50 2 CPU ranks on 1 node"
    assert parse_resnet(log).label == "resnet50 2 CPU ranks on 2 nodes"  # unmapped hosts count as their own


def test_unfinished_run_says_what_is_missing():
    run = parse_resnet(LOG.rsplit("railforge-resnet50: result", 1)[0])
    assert run.result is None and len(run.steps) == 2
    assert run.missing == ("the 'railforge-resnet50: result ...' line (the run did not finish)",)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("railforge-resnet50: step=1 gpus=8", "expected railforge-resnet50: keys images_per_sec, gpus"),
        ("railforge-resnet50: step=1 images_per_sec=fast gpus=8", "expected images_per_sec=<float>"),
        ("railforge-resnet50: step=1 images_per_sec=10 gpus=0", "expected gpus=<at least 1>"),
        ("railforge-resnet50: step=1 images_per_sec=10 gpus=0 device=cpu", "expected ranks=<at least 1> on device=cpu"),
        ("railforge-resnet50: step=1 images_per_sec=10 gpus=1 device=tpu", "expected device=cuda or device=cpu"),
    ],
)
def test_malformed_line_names_file_line_and_key(line, expected):
    with pytest.raises(ParseError, match=rf"^rn50\.log:2: {expected}"):
        parse_resnet(f"starting\n{line}\n", "rn50.log")


def test_no_lines_is_a_clear_error():
    with pytest.raises(
        ParseError, match=re.escape("expected 'railforge-resnet50: step=... images_per_sec=... gpus=...' lines")
    ):
        parse_resnet("Traceback (most recent call last):\n")


# One H200 (benchmarks/gpu_node_capture.sh, 2026-11-28): batch, the result line's rate, the step lines' range.
MEASURED = {
    "resnet50/railforge-resnet50-1x-h200-batch32.txt": (32, 967.4, (914.9, 998.0)),
    "resnet50/railforge-resnet50-1x-h200-batch256.txt": (256, 2180.2, (2178.6, 2182.8)),
}


def test_every_real_run_is_covered():
    assert fixture_names("resnet50") == sorted(MEASURED)


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_real_gpu_runs(name):
    batch, rate, (low, high) = MEASURED[name]
    run = parse_resnet(read_body(name), name, {"vm": "h200-node"})
    assert run.missing == () and run.label == "resnet50 1 GPU on 1 node"
    result = run.result
    assert (result.images_per_sec, result.gpus, result.ranks, result.nodes, result.batch_per_gpu, result.steps) == (
        rate,
        1,
        1,
        1,
        batch,
        100,
    )
    assert not result.on_cpu and result.per_process == rate
    rates = [s.images_per_sec for s in run.steps]
    assert [s.step for s in run.steps] == list(range(10, 101, 10))
    assert (min(rates), max(rates)) == (low, high)
    # the result is the measured steps' throughput: the step lines' rates bracket it
    assert low <= rate <= high


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_any_cut_of_a_real_run_parses_or_raises_parse_error(name):
    for text in prefixes(read_body(name)):
        try:
            run = parse_resnet(text, name)
        except ParseError as error:
            assert str(error).startswith(f"{name}:")
        else:
            assert run.result is None or run.result.steps == 100


def test_a_result_line_cut_before_its_steps_is_a_clear_error():
    name = "resnet50/railforge-resnet50-1x-h200-batch32.txt"
    text = read_body(name)
    cut = text[: text.index(" steps=100")]
    with pytest.raises(
        ParseError, match=r":11: expected railforge-resnet50: result \.\.\. steps=<measured steps> at the end"
    ):
        parse_resnet(cut, name)
    with pytest.raises(ParseError, match=r":11: expected steps=100, the last step line's step, found .* steps=10'"):
        parse_resnet(cut + " steps=10", name)
