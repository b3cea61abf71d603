"""nccl-tests parser on every real output in tests/fixtures/realdata/bench/nccl-tests."""

from __future__ import annotations

import contextlib

import pytest
from benchdata import fixture_names, prefixes, read_body

from railforge.bench.errors import ParseError
from railforge.bench.nccl import ChannelPath, parse_nccl_tests

H100 = "nccl-tests/all_reduce_perf-2node-16xh100-ndr-cx7-slurm-srun-label-prefix-validation-off.txt"
A100 = "nccl-tests/all_reduce_perf-2node-1x-a100-pcie-each-cx6-hdr-ib-sharp-plugin-gdrdma-nccl-debug-info.txt"
H200 = "nccl-tests/all_reduce_perf-2node-h200-8gpu-each-single-shared-rdma-if-ib-disabled.txt"
L40S = "nccl-tests/all_reduce_perf-2node-l40s-2gpu-each-sriov-roce-ib-enabled-debug-version.txt"
GATHER = "nccl-tests/gather_perf-2node-a100-pcie-1gpu-each-cx6-ib-gdrdma-nccl-debug-trace-NO-AVG-LINE.txt"
ONE_H200 = "nccl-tests/all_reduce_perf-1gpu-h200-nccl-2.28.9-older-nccl-tests-format.txt"
K80 = "nccl-tests/all_reduce_perf-1node-4x-tesla-k80-error-column-azureml.txt"
NO_RDMA = "NCCL chose network Socket; NCCL found no RDMA device (NET/IB : No device found)"

# file -> (label, rows, first size, last size, last out-of-place busbw, avg busbw, inter-node transport,
#          socket fallback reason)   read by hand from the files
EXPECTED = {
    H100: ("nccl-tests 8x2", 11, 8388608, 8589934592, 155.57, 142.735, (), ""),
    A100: ("all_reduce 1x2", 28, 8, 1073741824, 6.44, 2.36313, ("ib",), ""),
    H200: ("all_reduce 8x2", 32, 8, 17179869184, 92.33, 36.2205, (), "NCCL_IB_DISABLE=1 is set"),
    L40S: ("all_reduce 2x2", 31, 8, 8589934592, 9.63, 4.74277, (), ""),
    GATHER: ("gather 1x2", 85, 134217728, 11408506880, 10.91, None, ("ib",), ""),
    ONE_H200: ("nccl-tests 1x1", 28, 8, 1073741824, 0.0, 0.0, (), NO_RDMA),
    K80: ("nccl-tests 4x1", 7, 33554432, 2147483648, 2.56, 2.54225, (), ""),
}


def test_every_fixture_has_expectations():
    assert set(fixture_names("nccl-tests")) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name):
    label, rows, first, last, busbw, avg, transports, fallback = EXPECTED[name]
    run = parse_nccl_tests(read_body(name), name)
    assert run.label == label
    assert len(run.rows) == rows
    assert (run.rows[0].size_bytes, run.rows[-1].size_bytes) == (first, last)
    assert run.rows[-1].out_of_place.busbw_gbps == busbw
    assert run.avg_busbw_gbps == avg
    assert run.transports == transports
    assert run.socket_fallback == fallback
    assert len(run.hosts) == int(label.rsplit("x", 1)[1])


def test_h100_slurm_label_prefix_is_stripped_and_validation_off_reads_as_none():
    run = parse_nccl_tests(read_body(H100))
    assert run.hosts == ("node005", "node007")
    assert [r.rank for r in run.ranks] == list(range(16))
    assert run.ranks[8].gpu == "NVIDIA H100 80GB HBM3" and run.ranks[8].bus_id == "0x18"
    row = next(r for r in run.rows if r.size_bytes == 268435456)
    assert (row.out_of_place.time_us, row.out_of_place.algbw_gbps, row.out_of_place.busbw_gbps) == (
        3027.9,
        88.65,
        166.22,
    )
    assert (row.in_place.busbw_gbps, row.in_place.wrong, row.root) == (167.87, None, -1)
    assert not run.validation and run.out_of_bounds == 0 and run.missing == ()


def test_a100_debug_info_names_the_ib_transport_per_channel():
    run = parse_nccl_tests(read_body(A100))
    assert run.network == "IBext_v8" and run.nccl_version == "2.21.5+cuda12.4"
    assert [(d.name, d.port, d.link) for d in run.net_devices] == [("mlx5_0", 1, "IB")]
    assert {c.path for c in run.channels} == {"NET/IBext_v8/0/GDRDMA"}
    assert len(run.channels) == 8 and all(c.gdrdma for c in run.channels)
    assert {(c.src_rank, c.dst_rank, c.direction) for c in run.channels} >= {(1, 0, "receive"), (0, 1, "send")}
    assert run.env["NCCL_SHM_DISABLE"] == "1" and run.env["NCCL_NET_GDR_LEVEL"] == "SYS"
    assert run.nvls_channels == 0 and run.uses_rdma


def test_h200_ib_disabled_on_the_command_line_is_a_socket_fallback():
    run = parse_nccl_tests(read_body(H200))
    assert run.env["NCCL_IB_DISABLE"] == "1" and run.env["NCCL_IB_HCA"] == "mlx5_0"
    assert run.channels == () and not run.uses_rdma
    assert run.rows[-1].in_place.busbw_gbps == 92.35 and run.rows[-1].out_of_place.wrong == 0
    assert run.ranks[-1].host == "nvidiatools-dgx-9d-workload" and run.ranks[-1].bus_id == "0000:df:00"


def test_l40s_reduced_max_bytes_ends_the_sweep_early_without_missing_rows():
    run = parse_nccl_tests(read_body(L40S))
    assert run.max_bytes == 15534478677  # "# Reducing maxBytes to ..." (17179869184 asked)
    assert run.missing == () and run.socket_fallback == "" and run.env["NCCL_IB_DISABLE"] == "0"


def test_gather_without_avg_line_parses_and_says_what_is_missing():
    run = parse_nccl_tests(read_body(GATHER))
    assert run.collective == "gather" and run.max_bytes == 12703978837
    assert run.missing == (
        "result rows after 11408506880 B (the sweep runs to 12703978837 B)",
        "the 'Out of bounds values' line",
        "the 'Avg bus bandwidth' line",
    )
    assert [(d.name, d.link) for d in run.net_devices] == [("mlx5_0", "RoCE"), ("mlx5_2", "IB")]
    assert {c.path for c in run.channels} == {"NET/IB/1/GDRDMA", "NET/IB/1/GDRDMA/Shared"}
    assert run.rows[0].redop == "none" and run.rows[0].root == 0


@pytest.mark.parametrize(
    ("path", "transport", "gdrdma"),
    [
        ("NET/IB/3/GDRDMA", "ib", True),
        ("NET/IBext_v8/0/GDRDMA", "ib", True),
        ("NET/IB/0", "ib", False),
        ("NET/Socket/0", "socket", False),
        ("NET/AWS Libfabric/0", "net", False),
        ("P2P/IPC", "p2p", False),
        ("P2P/CUMEM/read", "p2p", False),
        ("SHM/direct/direct", "shm", False),
        ("NVLS", "nvls", False),
    ],
)
def test_channel_transport(path, transport, gdrdma):
    channel = ChannelPath(0, 0, 1, "send", path)
    assert (channel.transport, channel.gdrdma) == (transport, gdrdma)


def test_socket_channels_in_a_debug_log_are_a_fallback():
    text = (
        read_body(A100).replace("NET/IBext_v8/0/GDRDMA", "NET/Socket/0").replace("network IBext_v8", "network Socket")
    )
    run = parse_nccl_tests(text)
    assert run.socket_fallback == "NCCL chose network Socket; channels connect via NET/Socket"
    assert run.transports == ("socket",)


def test_no_rdma_device_in_the_pod_is_named():
    ib_line = "NET/IB : Using [0]mlx5_0:1/IB/SHARP [RO]; OOB eno1:192.168.160.111<0>"
    text = read_body(A100).replace(ib_line, "NET/IB : No device found.").replace("network IBext_v8", "network Socket")
    run = parse_nccl_tests(text.replace("NET/IBext_v8/0/GDRDMA", "NET/Socket/0"))
    assert "NCCL found no RDMA device (NET/IB : No device found)" in run.socket_fallback.split("; ")
    # channels still over IB: the missing device on one node alone is not called a fallback
    assert parse_nccl_tests(text).socket_fallback == "NCCL chose network Socket"


def test_nvls_channels_count_as_a_transport():
    run = parse_nccl_tests(read_body(A100).replace("0 nvls channels", "16 nvls channels"))
    assert run.nvls_channels == 16 and run.transports == ("ib", "nvls")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_any_cut_parses_or_raises_parse_error(name):
    for text in prefixes(read_body(name)):
        with contextlib.suppress(ParseError):
            run = parse_nccl_tests(text, name)
            assert run.rows


def test_the_older_format_gives_time_in_us_and_no_per_row_count():
    run = parse_nccl_tests(read_body(ONE_H200), "h200.txt", "all_reduce")
    assert run.label == "all_reduce 1x1" and run.hosts == ("vm",)
    assert run.ranks[0].gpu == "NVIDIA H200" and run.nccl_version == "2.28.9+cuda13.0"  # from the INFO line
    assert (run.threads, run.gpus_per_process, run.validation) == (1, 1, True)
    assert (run.out_of_bounds, run.avg_busbw_gbps, run.missing) == (0, 0.0, ())
    largest = run.rows[-1].out_of_place
    assert (largest.time_us, largest.algbw_gbps, largest.busbw_gbps, largest.wrong) == (507.0, 2117.88, 0.0, None)
    assert [r.out_of_place.time_us for r in run.rows[:2]] == [7.0, 6.0]  # printed 0.007 and 0.006 ms
    assert all(r.in_place.wrong is None and r.in_place.busbw_gbps == 0.0 for r in run.rows)


def test_an_error_column_gives_no_count_and_keeps_the_time_in_us():
    run = parse_nccl_tests(read_body(K80), "k80.txt")
    first = run.rows[0]
    assert (first.out_of_place.time_us, first.in_place.time_us) == (19902.0, 19898.0)
    assert all(r.out_of_place.wrong is None and r.in_place.wrong is None for r in run.rows)
    assert run.out_of_bounds == 0 and run.validation
    # the paste has no "Reducing maxBytes" line, so the sweep looks cut after 2 GiB
    assert run.missing == ("result rows after 2147483648 B (the sweep runs to 8589934592 B)",)
    text = read_body(K80)
    bad = text.replace("2.53  2e-07    19898", "2.53  2e-O7    19898")
    with pytest.raises(ParseError, match=r"^k80\.txt:\d+: expected a number in a results row \(.* busbw error "):
        parse_nccl_tests(bad, "k80.txt")


def test_an_older_format_row_cut_mid_line_names_its_columns():
    text = read_body(ONE_H200)
    cut = text.index("  1073741824     268435456") + 50  # inside the out-of-place busbw column
    with pytest.raises(ParseError, match=r"^h200\.txt:\d+: expected a results row of 12 or 13 columns \(.* time\(ms\)"):
        parse_nccl_tests(text[:cut], "h200.txt")


def test_row_cut_mid_line_names_file_line_and_columns():
    text = read_body(H200)
    cut = text.index("  1073741824     268435456") + 60  # inside the out-of-place time column
    with pytest.raises(ParseError) as error:
        parse_nccl_tests(text[:cut], "h200.txt")
    assert str(error.value).startswith("h200.txt:54: expected a results row of 12 or 13 columns")


def test_no_header_is_a_clear_error():
    with pytest.raises(ParseError, match=r"^x\.txt: expected an nccl-tests header line '# nThread"):
        parse_nccl_tests("NCCL version 2.27.3\n", "x.txt")


def test_header_without_rows_is_a_clear_error():
    head = read_body(L40S).split("           8             2")[0]
    with pytest.raises(ParseError, match="expected result rows after the '#  size  count"):
        parse_nccl_tests(head)
