"""Run the real module once through the `ansible` CLI (check mode) against a built sysfs tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.module_utils.railforge_hwfacts import gather_device_facts, gather_hw_facts
from shapes import SHAPES, realdata

from railforge.hwsim import build

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


def _run_main(monkeypatch, capsys, args: dict) -> dict:
    import importlib.util

    from ansible.module_utils import _internal, basic
    from ansible.module_utils.common.text.converters import to_bytes

    spec = importlib.util.spec_from_file_location("railforge_hw_facts", ROOT / "plugins/modules/railforge_hw_facts.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    # Once a test in this process has imported controller code (an action or filter plugin), module warnings go to
    # the controller's display instead of the result; a module runs on the target.
    monkeypatch.setattr(_internal, "is_controller", False)
    with pytest.raises(SystemExit):
        mod.main()
    return json.loads(capsys.readouterr().out)


def test_module_run_commands_and_fallback(tmp_path, monkeypatch, capsys):
    tree = build(tmp_path / "tree", SHAPES["dgx_h100"]())
    bindir = tmp_path / "bin"
    bindir.mkdir()
    outputs = {
        # nvidia-smi prints a cut matrix: the module warns and falls back to the PCI tree
        "nvidia-smi": realdata("nvidia-smi-topo/gb200-4gpu-nv18-6nic-numa-affinity-lists-PARTIAL.txt"),
        "ibdev2netdev": realdata("ibdev2netdev/dgx-h100-style-8ib-ibpXXs0-3eth-cnode3-011.txt"),
    }
    for name, text in outputs.items():
        (bindir / f"{name}.txt").write_text(text)
        script = bindir / name
        script.write_text(f"#!/bin/sh\ncat '{bindir / name}.txt'\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ.get('PATH', '')}")
    res = _run_main(monkeypatch, capsys, {"root": str(tree), "run_commands": True, "_ansible_check_mode": True})
    assert res["changed"] is False and not res.get("failed")
    facts = res["ansible_facts"]["railforge_hw"]
    assert facts["affinity_source"] == "sysfs"
    # ansible-core 2.19 returns structured warnings; match on their serialized form
    assert "ignoring unparsable output of nvidia-smi topo" in json.dumps(res["warnings"])
    # the fallback is in the facts too, where playbooks/validate.yml shows it per node
    assert any(w.startswith("ignoring unparsable output of nvidia-smi topo") for w in facts["warnings"])
    assert facts["hcas"][0]["ports"][0]["netdev_link"] == "Up"  # came from the ibdev2netdev run
    assert facts["rail_count"] == 8


def test_module_fails_on_bad_user_text(tmp_path, monkeypatch, capsys):
    text = realdata("nvidia-smi-topo/gb200-4gpu-nv18-6nic-numa-affinity-lists-PARTIAL.txt")
    res = _run_main(monkeypatch, capsys, {"root": str(tmp_path), "topo_text": text})
    assert res["failed"] is True and res["tool"] == "nvidia-smi topo"
    assert "cut off in row GPU3" in res["msg"]


def test_module_failed_command_and_idle_ports_reported_in_facts(tmp_path, monkeypatch, capsys):
    """A command that fails and IB ports waiting for a subnet manager: both are warnings in the facts."""
    tree = build(tmp_path / "tree", SHAPES["hgx_h100_12nic_sm_down"]())
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "nvidia-smi"
    script.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate' >&2\nexit 9\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    res = _run_main(monkeypatch, capsys, {"root": str(tree), "run_commands": True, "_ansible_check_mode": True})
    facts = res["ansible_facts"]["railforge_hw"]
    assert facts["rails"] == [] and facts["rail_count"] == 0
    assert facts["warnings"][0].startswith("nvidia-smi topo -m exited 9: NVIDIA-SMI has failed")
    assert "no rails at all (is the subnet manager up?" in facts["warnings"][-1]
    assert "no rails at all" in json.dumps(res["warnings"])


def test_module_mixes_link_layers_only_when_asked(tmp_path, monkeypatch, capsys):
    tree = build(tmp_path / "tree", SHAPES["hgx_h100_12nic_sm_partial"]())
    apart = _run_main(monkeypatch, capsys, {"root": str(tree)})["ansible_facts"]["railforge_hw"]
    mixed = _run_main(monkeypatch, capsys, {"root": str(tree), "mix_link_layers": True})
    assert apart["rdma_link_layers"] == ["InfiniBand"]
    assert mixed["ansible_facts"]["railforge_hw"]["rdma_link_layers"] == ["Ethernet", "InfiniBand"]


def test_module_devices_scope_lists_hcas_without_rails_or_warnings(tmp_path, monkeypatch, capsys):
    """scope=devices is the node roles' detector: the rails' warnings of an idle fabric are not its business, and
    its partial facts are returned under `devices`, never published over the host's full railforge_hw."""
    tree = build(tmp_path / "tree", SHAPES["hgx_h100_12nic_sm_down"]())
    res = _run_main(monkeypatch, capsys, {"root": str(tree), "scope": "devices", "_ansible_check_mode": True})
    assert res["changed"] is False
    assert "ansible_facts" not in res
    facts = res["devices"]
    assert facts == json.loads(json.dumps(gather_device_facts(str(tree))))
    assert facts["warnings"] == []
    assert facts["gpu_count"] == 8 and len(facts["hca_functions"]) == facts["hca_count"] == 12
    assert "rails" not in facts


def test_module_devices_scope_refuses_options_it_would_ignore(tmp_path, monkeypatch, capsys):
    res = _run_main(monkeypatch, capsys, {"root": str(tmp_path), "scope": "devices", "run_commands": True})
    assert res["failed"] is True
    assert res["msg"] == "scope=devices gathers no affinity or rails: drop run_commands or use scope=all"
