"""benchmarks/gpu_node_capture.sh on a host without a GPU, with a stand-in nvidia-smi.

The stand-in answers each nvidia-smi view the script asks for with the real output of the H200 it was first run
on (tests/fixtures/realdata), so the files the script writes, and the hardware facts it derives from them, can be
checked. Without PyTorch or nvcc here, the steps that need them fail, and the script must carry on and count them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
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
    done = run_capture(bin_dir, out)
    return done, out


def run_capture(bin_dir: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    """The script with a PATH of bin_dir alone: the stand-in, the basic tools it calls and a python3 with the
    standard library only (so no PyTorch or mpi4py, whatever this host has); no nvcc, dcgmi or make."""
    for tool in ("bash", "cat", "dirname", "free", "grep", "head", "mkdir", "nproc", "tail", "tr", "uname"):
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(shutil.which(tool))
    python = bin_dir / "python3"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    python.chmod(0o755)
    return subprocess.run(
        ["bash", str(ROOT / "benchmarks/gpu_node_capture.sh"), str(out), *args],
        env={**os.environ, "PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


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
    # the versions step (no nvcc, torch or mpi4py) and both ResNet-50 runs fail; the nvidia-smi views do not
    assert [line.split(", see ")[1] for line in failed] == [
        "versions.txt",
        "resnet50-cuda-batch32.txt",
        "resnet50-cuda-batch256.txt",
    ]
    assert done.returncode == 3 and done.stdout.rstrip().endswith("3 step(s) failed")
    assert "ModuleNotFoundError" in (out / "resnet50-cuda-batch256.txt").read_text()


@pytest.mark.parametrize(
    ("make_source", "message"),
    [
        (lambda root: root / "absent", r"NCCL_TESTS_SRC .*/absent: no src/Makefile \(not an nccl-tests tree\)"),
        (lambda root: root, r"no nvcc on PATH and CUDA_HOME unset: nccl-tests needs the CUDA compiler"),
    ],
)
def test_an_unusable_nccl_tests_build_is_refused_before_anything_is_written(tmp_path, make_source, message):
    (tmp_path / "src").mkdir()
    (tmp_path / "src/Makefile").write_text("build:\n")
    (tmp_path / "src/all_reduce.cu").write_text("")
    bin_dir, out = tmp_path / "bin", tmp_path / "out"
    bin_dir.mkdir()
    done = run_capture(bin_dir, out, str(make_source(tmp_path)))
    assert done.returncode == 2 and done.stdout == ""
    assert re.search(message, done.stderr), done.stderr
    assert not out.exists()
