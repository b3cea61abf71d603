"""Module railforge_mlxconfig against the stand-in mlxconfig: query first, write only what differs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "tests/standins/mlxconfig_standin.py"


@pytest.fixture
def firmware(tmp_path):
    """A stand-in mlxconfig keeping its state under tmp_path, starting with SR-IOV already enabled."""
    (tmp_path / "0000:3b:00.0.json").write_text('{"SRIOV_EN": 1}')
    tool = tmp_path / "mlxconfig"
    tool.write_text(f'#!/bin/sh\nSTANDIN_MLXCONFIG_DIR={tmp_path} exec {sys.executable} {STANDIN} "$@"\n')
    tool.chmod(0o755)
    return tmp_path


def run_module(firmware: Path, settings: dict, check: bool = False) -> dict:
    tool = str(firmware / "mlxconfig")
    args = json.dumps({"device": "0000:3b:00.0", "mlxconfig": tool, "settings": settings})
    command = ["ansible", "localhost", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}"]
    command += ["-m", "railforge_mlxconfig", "-a", args, "-o"] + (["--check"] if check else [])
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_LOAD_CALLBACK_PLUGINS": "0"}
    out = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, check=False).stdout
    status, result = out.split("=>", 1)
    return {**json.loads(result), "failed": "FAILED" in status}


def writes(firmware: Path) -> list[str]:
    log = firmware / "standin-mlxconfig.log"
    return log.read_text().splitlines() if log.exists() else []


WANTED = {"SRIOV_EN": True, "NUM_OF_VFS": 8, "LINK_TYPE_P1": "ETH"}


def test_only_differing_values_are_written_then_nothing(firmware):
    first = run_module(firmware, WANTED)
    assert first["changed"] and first["reset_required"]
    assert first["changes"] == {
        "NUM_OF_VFS": {"before": "0", "after": "8"},
        "LINK_TYPE_P1": {"before": "IB(1)", "after": "ETH"},
    }
    assert writes(firmware) == ["0000:3b:00.0 NUM_OF_VFS=8", "0000:3b:00.0 LINK_TYPE_P1=ETH"]
    second = run_module(firmware, {"SRIOV_EN": 1, "NUM_OF_VFS": "8", "LINK_TYPE_P1": "eth"})
    assert not second["changed"] and not second["reset_required"]
    assert len(writes(firmware)) == 2


def test_check_mode_reports_without_writing(firmware):
    result = run_module(firmware, WANTED, check=True)
    assert result["changed"]
    assert writes(firmware) == []


def test_unknown_parameter_is_named(firmware):
    result = run_module(firmware, {"NO_SUCH_PARAM": 1})
    assert result.get("failed")
    assert "mlxconfig query of 0000:3b:00.0 failed" in result["msg"] and "NO_SUCH_PARAM" in result["msg"]
