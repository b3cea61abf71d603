"""perftest parser on every real output in tests/fixtures/realdata/bench/perftest."""

from __future__ import annotations

import contextlib

import pytest
from benchdata import fixture_names, prefixes, read_body

from railforge.bench.errors import ParseError
from railforge.bench.perftest import parse_perftest

LAT = "perftest/ib_read_lat-roce-k8s-pod-mlx5_0-client.txt"
BW100 = "perftest/ib_write_bw-a-report_gbits-roce-100g-k8s-pod-egx-client.txt"
BW200 = "perftest/ib_write_bw-a-report_gbits-roce-200g-k8s-pod-client.txt"
POST_LIST = "perftest/ib_write_bw-post-list-8B-60s-roce-ib0-partial-paste.txt"

# file -> (tool, device, link type, GID index, rows, missing)
EXPECTED = {
    LAT: ("ib_read_lat", "mlx5_0", "Ethernet", "3", 1, ()),
    BW100: ("ib_write_bw", "mlx5_0", "Ethernet", "2", 23, ("the dashes line that closes the results",)),
    BW200: ("ib_write_bw", "mlx5_0", "Ethernet", "3", 23, ()),
    POST_LIST: ("ib_write_bw", "ib0", "Ethernet", "2", 1, ()),
}


def test_every_fixture_has_expectations():
    assert set(fixture_names("perftest")) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name):
    tool, device, link, gid, rows, missing = EXPECTED[name]
    run = parse_perftest(read_body(name), name)
    assert (run.tool, run.device, run.parameters["Link type"], run.parameters["GID index"]) == (tool, device, link, gid)
    assert len(run.bandwidth or run.latency) == rows
    assert [m.split(" (")[0] for m in run.missing] == list(missing)
    assert not run.gpu_memory


def test_200g_sweep_values_in_gbits():
    run = parse_perftest(read_body(BW200))
    first, last = run.bandwidth[0], run.bandwidth[-1]
    assert (first.size_bytes, first.iterations, first.peak, first.average, first.msg_rate_mpps) == (
        2,
        5000,
        0.090062,
        0.088598,
        5.537347,
    )
    assert (last.size_bytes, last.average_gbps, last.unit) == (8388608, 196.07, "Gb/sec")
    assert max(r.peak_gbps for r in run.bandwidth) == 196.07
    assert run.parameters["Mtu"] == "4096[B]" and run.parameters["PCIe relax order"] == "ON"


def test_100g_peak_and_average():
    run = parse_perftest(read_body(BW100))
    row = next(r for r in run.bandwidth if r.size_bytes == 65536)
    assert (row.peak, row.average) == (88.08, 88.08)
    assert run.bandwidth[-1].average == 83.75
    assert "PCIe relax order" not in run.parameters  # older perftest header


def test_latency_columns_and_cpu_warnings_skipped():
    run = parse_perftest(read_body(LAT))
    (row,) = run.latency
    assert (row.size_bytes, row.iterations) == (2, 1000)
    assert row.usec == {
        "t_min": 4.70,
        "t_max": 13.20,
        "t_typical": 4.83,
        "t_avg": 4.82,
        "t_stdev": 0.00,
        "99% percentile": 4.91,
        "99.9% percentile": 13.20,
    }
    assert run.parameters["Outstand reads"] == "16"


def test_post_list_paste_with_tabs():
    run = parse_perftest(read_body(POST_LIST))
    assert run.title == "RDMA_Write Post List BW Test"
    assert run.parameters["Post List"] == "128" and run.parameters["rdma_cm QPs"] == "OFF"
    assert run.parameters["Transport type"] == "IB" and run.parameters["Using SRQ"] == "OFF"
    (row,) = run.bandwidth
    assert (row.size_bytes, row.iterations, row.peak, row.average, row.msg_rate_mpps) == (
        8,
        224958464,
        0.0,
        0.48,
        7.498617,
    )


@pytest.mark.parametrize("unit", ["MB", "MiB"])  # later perftest releases print MiB/sec for the same figure
def test_without_report_gbits_mb_per_sec_is_mebibytes(unit):
    text = read_body(BW200).replace("[Gb/sec]", f"[{unit}/sec]")
    run = parse_perftest(text)
    assert run.bandwidth[-1].unit == f"{unit}/sec"
    # perftest's MB/sec divides by 2^20 bytes; 196.07 MiB/s = 196.07 * 1048576 * 8 / 1e9 Gb/s
    assert run.bandwidth[-1].average_gbps == pytest.approx(1.644754, abs=1e-6)


def test_use_cuda_and_dma_buf_lines():
    cuda = (
        "initializing CUDA\nListing all CUDA devices in system:\nCUDA device 0: PCIe address is 8F:00\n\n"
        "Picking device No. 0\n[pid = 29, dev = 0] device name = [NVIDIA H200]\ncreating CUDA Ctx\n"
        "using DMA-BUF for GPU buffer address at 0x78e9f8800000 aligned at 0x78e9f8800000 with aligned size 16777216\n"
    )
    body = read_body(BW200)
    command, rest = body.split("\n", 1)
    run = parse_perftest(f"{command}\n{cuda}{rest}")
    assert (run.cuda_device, run.cuda_gpu, run.dma_buf, run.gpu_memory) == (0, "NVIDIA H200", True, True)
    assert run.bandwidth[-1].average_gbps == 196.07


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_any_cut_parses_or_raises_parse_error(name):
    for text in prefixes(read_body(name)):
        with contextlib.suppress(ParseError):
            run = parse_perftest(text, name)
            assert run.bandwidth or run.latency


def test_row_cut_mid_line_is_a_clear_error():
    text = read_body(BW200)
    cut = text.index(" 131072     5000") + 30
    with pytest.raises(ParseError, match=r"^bw\.txt:40: expected a results row of 5 columns under '#bytes"):
        parse_perftest(text[:cut], "bw.txt")


def test_cut_before_results_is_a_clear_error():
    text = read_body(LAT)
    with pytest.raises(ParseError, match=r"expected the results header"):
        parse_perftest(text[: text.index(" #bytes")])
    with pytest.raises(ParseError, match=r"expected a perftest title line"):
        parse_perftest(text.splitlines()[0])
