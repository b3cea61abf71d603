"""benchmarks/gpu_node_capture.sh on a host without a GPU, with a stand-in nvidia-smi.

The stand-in answers each nvidia-smi view the script asks for with the real output of the H200 it was first run
on (tests/fixtures/realdata), so the files the script writes, and the hardware facts it derives from them, can be
checked. Without PyTorch or nvcc here, the steps that need them fail, and the script must carry on and count them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REALDATA = ROOT / "tests/fixtures/realdata"
VIEWS = {  # nvidia-smi arguments -> the H200's output
    "": "nvidia-smi/default-table-1x-h200-580.159.04-firecracker-vm.txt",
    "-L": "nvidia-smi/L-1x-h200-no-mig.txt",
    "-q": "nvidia-smi/q-full-1x-h200-fabric-all-na.txt",
    "topo -m": "nvidia-smi-topo/1x-h200-no-nic-ansi-underlined-header.txt",
    "--query-gpu=index,name,driver_version,persistence_mode,mig.mode.current,pci.bus_id --format=csv,noheader": (
        "nvidia-smi/query-gpu-1x-h200.txt"
    ),
}


def body(rel: str) -> str:
    return "".join((REALDATA / rel).read_text().splitlines(keepends=True)[4:])


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    bin_dir, out = tmp_path_factory.mktemp("bin"), tmp_path_factory.mktemp("out")
    cases = "".join(f"    '{args}') fixture='{REALDATA / rel}' ;;\n" for args, rel in VIEWS.items())
    stand_in = bin_dir / "nvidia-smi"
    stand_in.write_text(
        f'#!/bin/sh\ncase "$*" in\n{cases}'
        "    *) echo \"stand-in nvidia-smi: no output for '$*'\" >&2; exit 2 ;;\nesac\n"
        'tail -n +5 "$fixture"\n'  # the output without the fixture's 4-line header
    )
    stand_in.chmod(0o755)
    # python3 is this interpreter (no PyTorch); nvcc and dcgmi are nowhere on PATH
    (bin_dir / "python3").symlink_to(sys.executable)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks/gpu_node_capture.sh"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done, out


def test_every_nvidia_smi_view_is_written_as_the_node_printed_it(capture):
    _, out = capture
    for name, args in (
        ("nvidia-smi", ""),
        ("nvidia-smi-L", "-L"),
        ("nvidia-smi-q", "-q"),
        ("nvidia-smi-topo", "topo -m"),
        ("nvidia-smi-query", next(a for a in VIEWS if a.startswith("--query-gpu"))),
    ):
        assert (out / f"{name}.txt").read_text() == body(VIEWS[args]), name


def test_the_facts_are_derived_from_the_captured_views(capture):
    _, out = capture
    facts = json.loads((out / "railforge-hw-facts.txt").read_text())
    assert facts["affinity_source"] == "nvidia-smi topo"  # the ANSI-underlined topo header was read
    assert facts["fabric"]["gpus_reporting"] == 1 and facts["fabric"]["state"] is None


def test_failed_steps_are_counted_and_do_not_stop_the_rest(capture):
    done, out = capture
    assert "== dcgmi: not installed on this node, no dcgmi diag output" in done.stdout
    failed = [line for line in done.stdout.splitlines() if line.startswith("   failed")]
    # the versions step (no nvcc, no torch) and both ResNet-50 runs (no torch) fail; the nvidia-smi views do not
    assert [line.split(", see ")[1] for line in failed] == [
        "versions.txt",
        "resnet50-cuda-batch32.txt",
        "resnet50-cuda-batch256.txt",
    ]
    assert done.returncode == 3 and done.stdout.rstrip().endswith("3 step(s) failed")
    assert "ModuleNotFoundError" in (out / "resnet50-cuda-batch256.txt").read_text()
