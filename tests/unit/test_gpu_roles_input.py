"""The NVIDIA roles refuse bad input and a GPU-less host that must have a GPU, before changing anything.

Each case runs ansible-playbook in check mode against localhost with the roles' PCI detection pointed at an
empty tree, so nothing on the test machine is read as hardware or changed. The default repository segment is
rendered in-process for each supported distribution's facts.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: true
  tasks:
    - ansible.builtin.include_role:
        name: {role}
"""


def run_role(tmp_path: Path, role: str, extra: dict, env: dict | None = None) -> subprocess.CompletedProcess:
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK.format(role=role))
    variables = {
        "ansible_python_interpreter": sys.executable,
        "nvidia_driver_hw_root": str(tmp_path),
        "nvidia_driver_repo_distribution": "debian12",
        **extra,
    }
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
        **(env or {}),
    }
    return subprocess.run(
        ["ansible-playbook", "--check", "-i", "localhost,", "-e", json.dumps(variables), str(playbook)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )


def test_gpu_required_but_absent_fails_with_the_reason(tmp_path):
    result = run_role(tmp_path, "nvidia_driver", {"nvidia_driver_require_gpu": True})
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "must have an NVIDIA GPU (nvidia_driver_require_gpu is true) but no NVIDIA GPU was found" in output


def test_host_without_gpu_is_skipped_with_one_line(tmp_path):
    result = run_role(tmp_path, "nvidia_driver", {})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "has no NVIDIA GPU; skipping the NVIDIA stack on this host" in output
    assert "changed=0" in output


@pytest.mark.parametrize(
    ("role", "extra", "message"),
    [
        (
            "nvidia_driver",
            {"nvidia_driver_branch": "58"},
            "- nvidia_driver_branch must be a driver branch of three digits",
        ),
        (
            "nvidia_driver",
            {"nvidia_driver_version": "570.195.03"},
            "- nvidia_driver_version must be a version of nvidia_driver_branch 580",
        ),
        ("nvidia_driver", {"nvidia_driver_flavour": "closed"}, "nvidia_driver_flavour"),
        (
            "nvidia_driver",
            {"nvidia_driver_repo_base_url": "ftp://mirror"},
            "- nvidia_driver_repo_base_url must be a http/https/file URL",
        ),
        (
            "nvidia_driver",
            {"nvidia_driver_repo_distribution": "ubuntu1804"},
            "- nvidia_driver_repo_distribution must be a distribution the CUDA repository is supported for",
        ),
        (
            "cuda_toolkit",
            {"cuda_toolkit_versions": ["12.8"], "cuda_toolkit_default_version": "12.9"},
            "- cuda_toolkit_default_version must be one of cuda_toolkit_versions (12.8), got '12.9'",
        ),
        (
            "cuda_toolkit",
            {"cuda_toolkit_versions": ["12-8"], "cuda_toolkit_default_version": "12-8"},
            "- cuda_toolkit_versions[0] must be a CUDA version MAJOR.MINOR like \"12.8\", got '12-8'",
        ),
        (
            "nvidia_container_toolkit",
            {"nvidia_container_toolkit_version": "latest"},
            "- nvidia_container_toolkit_version must be a Debian package version like 1.17.8-1",
        ),
        (
            "nvidia_container_toolkit",
            {"nvidia_container_toolkit_containerd_config_version": 4},
            "nvidia_container_toolkit_containerd_config_version",
        ),
        (
            "nvidia_dcgm",
            {"nvidia_dcgm_version": "3.3.6"},
            "- nvidia_dcgm_version must be a DCGM 4 version with epoch like 1:4.5.2-1",
        ),
        ("nvidia_dcgm", {"nvidia_dcgm_cuda_major": 11}, "nvidia_dcgm_cuda_major"),
        (
            "nvidia_dcgm",
            {"nvidia_dcgm_exporter_port": 94000},
            "- nvidia_dcgm_exporter_port must be between 1 and 65535, got 94000",
        ),
        (
            "nvidia_dcgm",
            {"nvidia_dcgm_exporter_listen_address": "10.0.0.300:9400"},
            "- nvidia_dcgm_exporter_listen_address must be an IP address, got '10.0.0.300:9400'",
        ),
        (
            "nvidia_dcgm",
            {"nvidia_dcgm_exporter_hostengine": "localhost"},
            "- nvidia_dcgm_exporter_hostengine must be HOST:PORT like localhost:5555",
        ),
        (
            "nvidia_dcgm",
            {"nvidia_dcgm_exporter_collectors": [{"field": "GPU_TEMP", "type": "gauge", "help": "temperature"}]},
            "- nvidia_dcgm_exporter_collectors[0].field must be a DCGM field name (DCGM_FI_...), got 'GPU_TEMP'",
        ),
        ("nvidia_fabricmanager", {"nvidia_fabricmanager_enabled": "yes"}, "nvidia_fabricmanager_enabled"),
    ],
    ids=lambda value: value if isinstance(value, str) and " " not in value else None,
)
def test_malformed_input_fails_before_any_change_naming_the_variable(tmp_path, role, extra, message):
    result = run_role(tmp_path, role, extra)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert message in output, output
    if message.startswith("- "):  # a rule of plugins/module_utils/railforge_inventory.py, in the one message
        assert f"Invalid input for role {role} (nothing was changed):\n" in output, output
    assert "changed=0" in output, output


@pytest.mark.parametrize(
    ("distribution", "version", "major", "segment"),
    [
        ("Debian", "12.11", "12", "debian12"),
        ("Ubuntu", "22.04", "22", "ubuntu2204"),
        ("Ubuntu", "24.04", "24", "ubuntu2404"),
    ],
)
def test_repo_distribution_default_names_a_cuda_repository(distribution, version, major, segment):
    """The default segment, from the OS's vars file, is one the role accepts: Debian's from the major version only."""
    os_vars = yaml.safe_load((ROOT / f"roles/nvidia_driver/vars/{distribution}.yml").read_text())
    facts = {"distribution": distribution, "distribution_version": version, "distribution_major_version": major}
    template = os_vars["nvidia_driver_os_repo_distribution"]
    rendered = jinja2.Environment().from_string(template).render(ansible_facts=facts)
    assert rendered == segment
    assert (
        rendered
        in yaml.safe_load((ROOT / "roles/nvidia_driver/vars/main.yml").read_text())["nvidia_driver_distributions"]
    )


def fake_dpkg(tmp_path: Path, packages: str) -> dict:
    """PATH with a dpkg-query that lists only ``packages`` (lines of status|name|version): the machine's own are
    none of the test's business."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "packages").write_text(packages)
    script = bindir / "dpkg-query"
    script.write_text(f"#!/bin/sh\ncat '{bindir / 'packages'}'\n")
    script.chmod(0o755)
    return {"PATH": f"{bindir}:{os.environ['PATH']}"}


@pytest.mark.parametrize(
    ("packages", "rc", "message"),
    [
        ("", 0, "check mode and no NVIDIA driver installed yet; the fabric manager's install"),
        (
            "ii |nvidia-open|570.195.03-1\nii |nvidia-kernel-open-dkms|580.95.05-1\n",
            2,
            "NVIDIA driver packages of several versions (570.195.03, 580.95.05) installed",
        ),
        (
            "ii |nvidia-open|570.195.03-1\nii |nvidia-kernel-open-dkms|580.95.05-1\n"
            "ii |libxnvctrl0|525.85.05-3~deb12u1\n",
            2,
            "NVIDIA driver packages of several versions (570.195.03, 580.95.05) installed",
        ),
    ],
    ids=["no-driver-yet", "two-driver-versions", "debian-libxnvctrl-is-no-driver"],
)
def test_fabric_manager_check_run_previews_a_node_without_driver_but_not_a_broken_one(tmp_path, packages, rc, message):
    result = run_role(
        tmp_path, "nvidia_fabricmanager", {"nvidia_fabricmanager_enabled": "always"}, fake_dpkg(tmp_path, packages)
    )
    output = result.stdout + result.stderr
    assert result.returncode == rc, output
    assert message in output, output
