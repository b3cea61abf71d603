"""dcgmi diag parser on every real result table in tests/fixtures/realdata/bench/dcgmi."""

from __future__ import annotations

import contextlib

import pytest
from benchdata import fixture_names, prefixes, read_body

from railforge.bench.dcgm import parse_dcgmi_diag
from railforge.bench.errors import ParseError

PASS_R1 = "dcgmi/diag-r1-1x-v100-pcie-dcgm-3.3.9-all-pass.txt"
FAIL_R3 = "dcgmi/diag-r3-fail-early-8x-h100-cuinit-system-not-yet-initialized-fabricmanager-down.txt"


def test_every_fixture_is_covered():
    assert set(fixture_names("dcgmi")) == {PASS_R1, FAIL_R3}


def test_level_1_all_pass():
    diag = parse_dcgmi_diag(read_body(PASS_R1))
    assert diag.metadata == {
        "DCGM Version": "3.3.9",
        "Driver Version Detected": "560.35.03",
        "GPU Device IDs Detected": "1db4",
    }
    assert [t.name for t in diag.tests] == [
        "Denylist",
        "NVML Library",
        "CUDA Main Library",
        "Permissions and OS Blocks",
        "Persistence Mode",
        "Environment Variables",
        "Page Retirement/Row Remap",
        "Graphics Processes",
        "Inforom",
    ]
    assert {(t.section, t.status, t.scope) for t in diag.tests} == {("Deployment", "Pass", "")}
    assert diag.failed == () and diag.missing == ()


def test_level_3_gpu_memory_failure_with_wrapped_warnings():
    diag = parse_dcgmi_diag(read_body(FAIL_R3))
    assert diag.metadata["GPU Device IDs Detected"] == ",".join(["2330"] * 8)
    (failed,) = diag.failed
    assert (failed.section, failed.name, failed.scope) == ("Hardware", "GPU Memory", "All")
    assert len(failed.warnings) == 8
    # DCGM wrapped this text mid-word ("initiali" / "ze"); the parser joins it back
    assert failed.warnings[3] == (
        "GPU 3 Error using CUDA API cuInit Check DCGM and system logs for errors. Reset GPU. Restart DCGM. "
        "Rerun diagnostics. Unable to initialize CUDA library: 'system not yet initialized'. . Please check if "
        "a CUDA sample program can be run successfully on this host. Refer to https://github.com/nvidia/cuda-samples"
    )
    persistence = next(t for t in diag.tests if t.name == "Persistence Mode")
    assert persistence.status == "Pass"
    assert persistence.info[0].startswith("Persistence mode for GPU 0 is disabled. Enable persistence mode by running")
    assert persistence.info[0].endswith("Persistence mode for GPU 4 is disabled. Enable pers")  # DCGM's own cut
    skipped = {(t.section, t.name) for t in diag.tests if t.status == "Skip"}
    assert skipped == {("Integration", "PCIe"), ("Stress", "Memory Bandwidth"), ("Stress", "EUD Test")}


@pytest.mark.parametrize(
    ("result", "status", "scope"),
    [("Pass - GPUs: 0, 1", "Pass", "GPUs: 0, 1"), ("Fail - GPU: 2", "Fail", "GPU: 2"), ("Warn", "Warn", "")],
)
def test_per_gpu_results(result, status, scope):
    text = read_body(PASS_R1).replace(
        "| Inforom                   | Pass    ", f"| Inforom                   | {result}"
    )
    inforom = parse_dcgmi_diag(text).tests[-1]
    assert (inforom.status, inforom.scope) == (status, scope)


@pytest.mark.parametrize("name", [PASS_R1, FAIL_R3])
def test_any_cut_parses_or_raises_parse_error(name):
    for text in prefixes(read_body(name)):
        with contextlib.suppress(ParseError):
            assert parse_dcgmi_diag(text, name).tests


def test_cut_before_closing_border_says_so():
    text = read_body(FAIL_R3)
    diag = parse_dcgmi_diag(text[: text.rindex("\n+---") + 1])
    assert diag.missing == ("the table's closing border line (cut paste)",)
    assert diag.failed[0].name == "GPU Memory"


def test_cut_mid_row_and_unknown_result_are_clear_errors():
    text = read_body(PASS_R1)
    with pytest.raises(ParseError, match=r"^r1:12: expected a table row '\| name \| result \|'"):
        parse_dcgmi_diag(text[: text.index("| NVML Library") + 20], "r1")
    with pytest.raises(ParseError, match=r"expected a result 'Pass', 'Fail - All'.*found 'Maybe'"):
        parse_dcgmi_diag(text.replace("| Pass   ", "| Maybe  ", 1))
    with pytest.raises(ParseError, match=r"expected dcgmi diag's table header"):
        parse_dcgmi_diag("Successfully ran diagnostic for group.\n")
