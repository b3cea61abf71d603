"""Verdicts from the real fixtures: pass and fail of each kind, named the way an operator acts on them."""

from __future__ import annotations

import json

from benchdata import read_body

from railforge.bench.dcgm import parse_dcgmi_diag
from railforge.bench.floors import load_floors
from railforge.bench.judge import Results, judge, node_table, table, to_json
from railforge.bench.nccl import parse_nccl_tests
from railforge.bench.perftest import parse_perftest
from railforge.bench.resnet import parse_resnet

H100 = "nccl-tests/all_reduce_perf-2node-16xh100-ndr-cx7-slurm-srun-label-prefix-validation-off.txt"
A100 = "nccl-tests/all_reduce_perf-2node-1x-a100-pcie-each-cx6-hdr-ib-sharp-plugin-gdrdma-nccl-debug-info.txt"
H200 = "nccl-tests/all_reduce_perf-2node-h200-8gpu-each-single-shared-rdma-if-ib-disabled.txt"
GATHER = "nccl-tests/gather_perf-2node-a100-pcie-1gpu-each-cx6-ib-gdrdma-nccl-debug-trace-NO-AVG-LINE.txt"
ONE_H200 = "nccl-tests/all_reduce_perf-1gpu-h200-nccl-2.28.9-older-nccl-tests-format.txt"
BW200 = "perftest/ib_write_bw-a-report_gbits-roce-200g-k8s-pod-client.txt"
BW100 = "perftest/ib_write_bw-a-report_gbits-roce-100g-k8s-pod-egx-client.txt"
LAT = "perftest/ib_read_lat-roce-k8s-pod-mlx5_0-client.txt"
DCGM_FAIL = "dcgmi/diag-r3-fail-early-8x-h100-cuinit-system-not-yet-initialized-fabricmanager-down.txt"
DCGM_PASS = "dcgmi/diag-r1-1x-v100-pcie-dcgm-3.3.9-all-pass.txt"


def nccl(rel: str, collective: str | None = None):
    return parse_nccl_tests(read_body(rel), rel, collective)


def by_check(verdicts, check: str):
    (verdict,) = [v for v in verdicts if v.check == check]
    return verdict


def test_h200_with_ib_disabled_is_judged_a_socket_fallback():
    verdicts = judge(Results(nccl=(nccl(H200),)), load_floors("h200-sxm-cx7-ndr"))
    fallback = by_check(verdicts, "transport")
    assert fallback.status == "fail"
    assert fallback.message == (
        "all_reduce 8x2: NCCL fell back to sockets (NCCL_IB_DISABLE or no RDMA device in the pod): "
        "NCCL_IB_DISABLE=1 is set"
    )
    # no multi-node floor for H200 (the only public run is this one): the figure is reported, not judged
    figure = by_check(verdicts, "nccl_all_reduce_multinode")
    assert figure.status == "info" and figure.measured == 92.33  # out-of-place busbw at the largest size
    assert figure.message.startswith("all_reduce 8x2: 92.33 GB/s bus bandwidth at 16 GiB (no floor for h200")


def test_a_one_gpu_all_reduce_is_reported_not_failed_against_the_8_gpu_floor():
    verdicts = judge(Results(nccl=(nccl(ONE_H200, "all_reduce"),)), load_floors("h200-sxm-cx7-ndr"))
    (figure,) = verdicts  # one node: no transport check; validated and complete: no other verdict
    assert (figure.check, figure.status, figure.measured, figure.nodes) == (
        "nccl_all_reduce_1node",
        "info",
        0.0,
        ("vm",),
    )
    assert figure.message == (
        "all_reduce 1x1: one rank sends nothing between GPUs, so its bus bandwidth is 0 by definition; "
        "2117.88 GB/s algorithm bandwidth at 1 GiB (within one GPU's memory), not judged"
    )


def test_h100_two_nodes_against_the_measured_floor_and_a_raised_one():
    run = nccl(H100, collective="all_reduce")
    bandwidth = by_check(judge(Results(nccl=(run,)), load_floors("h100-sxm-cx7-ndr")), "nccl_all_reduce_multinode")
    assert (bandwidth.status, bandwidth.measured, bandwidth.limit) == ("pass", 155.57, 155.57)
    assert "tests/fixtures/realdata/bench/nccl-tests/all_reduce_perf-2node-16xh100" in bandwidth.source
    raised = load_floors(
        "h100-sxm-cx7-ndr", {"h100-sxm-cx7-ndr": {"floors": {"nccl_all_reduce_multinode": {"busbw_gbps": 360}}}}
    )
    verdicts = judge(Results(nccl=(run,)), raised)
    assert by_check(verdicts, "nccl_all_reduce_multinode").message == (
        "all_reduce 8x2: 155.57 GB/s bus bandwidth at 8 GiB < 360 GB/s floor"
    )
    assert by_check(verdicts, "correctness").status == "warn"  # validation off: unchecked, not wrong
    assert by_check(verdicts, "transport").message.endswith(
        "transport not shown; run with NCCL_DEBUG=INFO to see NET/IB or NET/Socket"
    )


def test_ib_with_gdrdma_passes_the_transport_check_and_a_short_sweep_is_named():
    verdicts = judge(Results(nccl=(nccl(A100),)), load_floors("h100-sxm-cx7-ndr"))
    assert (
        by_check(verdicts, "transport").message == "all_reduce 1x2: inter-node traffic over NET/IB with GPUDirect RDMA"
    )
    bandwidth = by_check(verdicts, "nccl_all_reduce_multinode")
    assert bandwidth.status == "fail"
    assert bandwidth.message.endswith(
        "6.44 GB/s bus bandwidth at 1 GiB < 155.57 GB/s floor (largest message 1 GiB < 8 GiB of the floor)"
    )


def test_ib_without_gdrdma_is_a_warning():
    text = read_body(A100).replace("/GDRDMA", "")
    verdicts = judge(Results(nccl=(parse_nccl_tests(text),)), load_floors("h100-sxm-cx7-ndr"))
    assert by_check(verdicts, "transport").status == "warn"


def test_wrong_results_fail():
    text = read_body(A100)
    row = "     1048576        262144     float     sum      -1   3332.3    0.31    0.31      0"
    assert row in text
    verdicts = judge(
        Results(nccl=(parse_nccl_tests(text.replace(row, row[:-1] + "7")),)), load_floors("a100-sxm4-cx6-hdr")
    )
    correctness = by_check(verdicts, "correctness")
    assert (correctness.status, correctness.message) == (
        "fail",
        "all_reduce 1x2: 7 wrong values, first at 1 MiB (out-of-place)",
    )


def test_incomplete_output_is_a_warning_and_other_collectives_have_no_floor():
    verdicts = judge(Results(nccl=(nccl(GATHER),)), load_floors("a100-sxm4-cx6-hdr"))
    assert [(v.check, v.status) for v in verdicts] == [("complete", "warn"), ("transport", "pass")]
    assert "missing result rows after 11408506880 B" in verdicts[0].message


def test_rail_below_and_above_floor():
    run = parse_perftest(read_body(BW200))
    failed = judge(Results(perftest=(("dgx-03", run),)), load_floors("h200-sxm-cx7-ndr"))
    assert [v.message for v in failed] == [
        "node dgx-03 rail mlx5_0: 196.07 Gb/s ib_write_bw at 8 MiB, host memory < 360 Gb/s floor",
        # the H200 floor is Azure's GPUDirect figure: a run in host memory is named as not testing it
        "node dgx-03 rail mlx5_0: ib_write_bw ran in host memory, but the h200-sxm-cx7-ndr floor is for "
        "GPU memory (--use_cuda, GPUDirect RDMA)",
        # and the log is of a RoCE port, the class of InfiniBand ones
        "node dgx-03 rail mlx5_0: the log's link type is Ethernet, but class h200-sxm-cx7-ndr is InfiniBand NDR "
        "400 Gb/s",
    ]
    passed = judge(Results(perftest=(("gpu-rdma-pod-2", run),)), load_floors("l40s-roce-200g"))
    assert [(v.status, v.measured, v.limit) for v in passed] == [("pass", 196.07, 196.07)]


def test_a_log_that_contradicts_its_class_is_warned_about():
    """The GPU the log names and a DMA-BUF buffer asked for on the command line, against the class judged: the real
    200G RoCE paste with perftest's --use_cuda lines for an L40S put in, run with --use_cuda_dmabuf (whose buffer
    line, 'using DMA-BUF for GPU buffer', is missing: a perftest built without DMA-BUF support falls back)."""
    command, rest = read_body(BW200).split("\n", 1)
    cuda = "Picking device No. 0\n[pid = 29, dev = 0] device name = [NVIDIA L40S]\ncreating CUDA Ctx\n"
    run = parse_perftest(f"{command} --use_cuda=0 --use_cuda_dmabuf\n{cuda}{rest}")
    assert run.asked_dma_buf and not run.dma_buf
    warnings = [
        v for v in judge(Results(perftest=(("pod-2", run),)), load_floors("l40s-roce-200g")) if v.status == "warn"
    ]
    assert [(v.check, v.message) for v in warnings] == [
        (
            "buffers",
            "node pod-2 rail mlx5_0: ib_write_bw ran in GPU memory, but the l40s-roce-200g floor is for host memory",
        ),
        (
            "dma-buf",
            "node pod-2 rail mlx5_0: --use_cuda_dmabuf was asked for, but the log does not confirm a DMA-BUF buffer "
            "('using DMA-BUF for GPU buffer' missing): the figure may not be GPUDirect RDMA through DMA-BUF",
        ),
    ]
    other = [v.message for v in judge(Results(perftest=(("pod-2", run),)), load_floors("h100-sxm-cx7-ndr"))]
    assert "node pod-2 rail mlx5_0: the log's GPU is NVIDIA L40S, but class h100-sxm-cx7-ndr is for H100" in other
    assert (
        "node pod-2 rail mlx5_0: the log's link type is Ethernet, but class h100-sxm-cx7-ndr is InfiniBand NDR 400 Gb/s"
        in other
    )


def test_rail_in_host_memory_and_a_cut_paste():
    run = parse_perftest(read_body(BW100))
    verdicts = judge(Results(perftest=(("egx", run),)), load_floors("l40s-roce-100g"))
    assert [(v.check, v.status) for v in verdicts] == [("complete", "warn"), ("ib_write_bw", "pass")]


def test_latency_ceiling():
    run = parse_perftest(read_body(LAT))
    ok = judge(Results(perftest=(("pod-2", run),)), load_floors("l40s-roce-200g"))
    assert [v.message for v in ok] == ["node pod-2 rail mlx5_0: 4.83 us ib_read_lat typical at 2 B <= 4.83 us ceiling"]
    tighter = load_floors("l40s-roce-200g", {"l40s-roce-200g": {"floors": {"ib_read_lat": {"t_typical_usec": 2.5}}}})
    (slow,) = judge(Results(perftest=(("pod-2", run),)), tighter)
    assert (slow.status, slow.message) == (
        "fail",
        "node pod-2 rail mlx5_0: 4.83 us ib_read_lat typical at 2 B > 2.5 us ceiling",
    )


def test_dcgm_failure_names_the_test_and_the_cause():
    verdicts = judge(
        Results(
            dcgm=(("dgx-03", parse_dcgmi_diag(read_body(DCGM_FAIL))), ("v100", parse_dcgmi_diag(read_body(DCGM_PASS))))
        ),
        load_floors("h100-sxm-cx7-ndr"),
    )
    assert verdicts[0].status == "fail"
    assert verdicts[0].message.startswith(
        "node dgx-03 dcgmi diag: GPU Memory failed (All): GPU 0 Error using CUDA API cuInit"
    )
    assert (verdicts[1].status, verdicts[1].message) == ("pass", "node v100 dcgmi diag: no test failed (9 pass)")


def test_resnet_per_gpu_and_scaling_from_operator_floors():
    one = parse_resnet("railforge-resnet50: result images_per_sec=2900 gpus=8 nodes=1 steps=100\n", "1n")
    four = parse_resnet("railforge-resnet50: result images_per_sec=10440 gpus=32 nodes=4 steps=100\n", "4n")
    unfinished = parse_resnet("railforge-resnet50: step=10 images_per_sec=100 gpus=32 nodes=4\n", "crash")
    default = judge(Results(resnet=(one, four)), load_floors("h100-sxm-cx7-ndr"))
    assert {v.status for v in default} == {"info"}
    floors = load_floors(
        "h100-sxm-cx7-ndr",
        {
            "h100-sxm-cx7-ndr": {
                "floors": {
                    "resnet50_per_gpu": {"images_per_sec": 340, "source": "measured: acceptance"},
                    "resnet50_scaling": {"efficiency": 0.95, "source": "measured: acceptance"},
                }
            }
        },
    )
    verdicts = judge(Results(resnet=(one, four, unfinished)), floors)
    assert [v.message for v in verdicts] == [
        "resnet50 8 GPUs on 1 node: 362.5 images/s per GPU throughput >= 340 images/s per GPU floor",
        "resnet50 32 GPUs on 4 nodes: 326.25 images/s per GPU throughput < 340 images/s per GPU floor",
        "resnet50 32 GPUs on 4 nodes: missing the 'railforge-resnet50: result ...' line (the run did not finish)",
        "resnet50 32 GPUs on 4 nodes: 0.9 of linear scaling efficiency vs 8 GPUs < 0.95 of linear floor",
    ]


def test_resnet_scaling_compares_runs_of_one_batch_size():
    # the lent H200 at batch 32 and 256 (1 GPU each), and an 8-GPU run at batch 256
    b32, b256 = (
        parse_resnet(read_body(f"resnet50/railforge-resnet50-1x-h200-batch{b}.txt"), str(b)) for b in (32, 256)
    )
    eight = parse_resnet(
        "railforge-resnet50: result images_per_sec=16000 gpus=8 nodes=1 batch_per_gpu=256 steps=100\n", "8"
    )
    verdicts = judge(Results(resnet=(b32, eight, b256)), load_floors("h200-sxm-cx7-ndr"))
    (scaling,) = [v for v in verdicts if v.check == "resnet50_scaling"]
    assert (scaling.subject, scaling.measured) == ("resnet50 8 GPUs on 1 node", round(2000 / 2180.2, 4))
    assert "scaling efficiency vs 1 GPU" in scaling.message
    assert judge(Results(resnet=(b32, b256)), load_floors("h200-sxm-cx7-ndr"))[-1].check == "resnet50_per_gpu"


def test_resnet_cpu_fallback_is_information_without_a_floor():
    cpu = parse_resnet(
        "railforge-resnet50: result images_per_sec=6.5 gpus=0 ranks=2 nodes=2 batch_per_gpu=4 device=cpu steps=5\n"
    )
    (verdict,) = judge(Results(resnet=(cpu,)), load_floors("cpu-fallback"))
    assert (verdict.status, verdict.check, verdict.measured, verdict.unit) == ("info", "resnet50", 6.5, "images/s")
    assert verdict.message == "resnet50 2 CPU ranks on 2 nodes: 6.5 images/s, 3.25 per rank (CPU fallback: no floor)"


def test_table_and_json():
    hw = load_floors("h200-sxm-cx7-ndr")
    rail_log = "outputs/dgx-03/bench-r0-client.txt"
    results = Results(nccl=(nccl(H200),), perftest=(("dgx-03", parse_perftest(read_body(BW200), rail_log)),))
    verdicts = judge(results, hw)
    lines = table(verdicts).splitlines()
    assert lines[2].startswith("| FAIL | all_reduce 8x2 | transport |")
    # which floor (its value and where it comes from) and which log
    assert lines[3] == (
        "| FAIL | node dgx-03 rail mlx5_0 | ib_write_bw | 196.07 Gb/s | 360 Gb/s | "
        f"{hw.floors['ib_write_bw'].source} | bench-r0-client.txt | "
        "196.07 Gb/s ib_write_bw at 8 MiB, host memory < 360 Gb/s floor |"
    )
    data = json.loads(to_json(results, hw, verdicts))
    assert data["failed"] == 2 and data["hardware_class"]["floors"]["ib_write_bw"]["value"] == 360.0
    assert data["results"]["nccl"][0]["env"]["NCCL_IB_DISABLE"] == "1"
    assert data["results"]["perftest"][0][1]["bandwidth"][-1]["average"] == 196.07
    # warn: a host-memory run, and a RoCE log judged against an InfiniBand class
    assert [v["status"] for v in data["verdicts"]] == ["fail", "info", "fail", "warn", "warn"]
    assert data["verdicts"][2]["nodes"] == ["dgx-03"] and data["verdicts"][2]["rail"] == "mlx5_0"
    assert data["verdicts"][0]["nodes"] == ["nvidiatools-dgx-2d-workload", "nvidiatools-dgx-9d-workload"]


def test_node_table_names_each_node_its_rails_and_what_failed_there():
    results = Results(
        nccl=(nccl(A100),),
        perftest=(("test1", parse_perftest(read_body(BW200))), ("test1", parse_perftest(read_body(LAT)))),
        dcgm=(("test2", parse_dcgmi_diag(read_body(DCGM_FAIL))),),
    )
    assert node_table(judge(results, load_floors("h200-sxm-cx7-ndr"))).splitlines() == [
        "| node | rails | verdict | failed |",
        "| --- | --- | --- | --- |",
        "| test1 | mlx5_0 | FAIL | mlx5_0 ib_write_bw |",
        "| test2 | - | FAIL | dcgmi_diag |",
    ]
