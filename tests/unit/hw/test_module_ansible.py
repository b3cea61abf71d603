"""Run the real module once through the `ansible` CLI (check mode) against a built sysfs tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.module_utils.railforge_hwfacts import gather_hw_facts
from shapes import SHAPES, realdata
from sysfs_builder import build

ROOT = Path(__file__).resolve().parents[3]


def _ansible_bin():
    cand = Path(sys.executable).parent / "ansible"
    return str(cand) if cand.exists() else shutil.which("ansible")


@pytest.mark.skipif(_ansible_bin() is None, reason="ansible CLI not installed")
def test_module_through_ansible_cli(tmp_path):
    tree = build(tmp_path / "tree", SHAPES["dgx_h100"]())
    topo = realdata("nvidia-smi-topo/8gpu-nv18-12nic-cx7-ib-plus-cx6dx-eth-mooncake2039.txt")
    home = tmp_path / "home"
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(tmp_path / "none.cfg"),
        "ANSIBLE_HOME": str(home),
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_REMOTE_TEMP": str(home / "rtmp"),
        "ANSIBLE_LIBRARY": str(ROOT / "plugins/modules"),
        "ANSIBLE_MODULE_UTILS": str(ROOT / "plugins/module_utils"),
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.minimal",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
    }
    args = json.dumps({"root": str(tree), "topo_text": topo})
    proc = subprocess.run(
        [_ansible_bin(), "localhost", "-c", "local", "--check", "-m", "railforge_hw_facts", "-a", args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    head, _, payload = proc.stdout.partition(" => ")
    assert head.strip().endswith("localhost | SUCCESS"), proc.stdout[:500]
    res = json.loads(payload)
    assert res["changed"] is False
    facts = res["ansible_facts"]["railforge_hw"]
    # same answer as calling the module_utils directly (incl. warnings about the foreign topo text)
    assert facts == json.loads(json.dumps(gather_hw_facts(str(tree), topo_text=topo)))
    assert facts["affinity_source"] == "nvidia-smi topo"
    assert any("mlx5_11" in w for w in facts["warnings"])
    assert facts["gpu_count"] == 8 and facts["nvlink"]["links_per_gpu_pair"] == 18
