"""The RDMA roles stop before any change on bad input or a missing required HCA, naming the cause.

Each case runs one role against localhost in check mode with a fake sysfs tree, as an operator would run it.
"""

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
PLAY = """
- name: Apply one role
  hosts: all
  gather_facts: true
  tasks:
    - name: Apply the role under test
      ansible.builtin.include_role:
        name: "{{ role_under_test }}"
"""


def run_role(tmp_path: Path, role: str, variables: dict, group: str = "plain_nodes", sysfs=None):
    sysfs = sysfs or tmp_path / "sys"
    (sysfs / "bus/pci/devices").mkdir(parents=True, exist_ok=True)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {group: {"hosts": {"localhost": LOCAL}}}}}))
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY)
    extra = {"role_under_test": role, "doca_ofed_hw_root": str(sysfs.parent), **variables}
    return check_run(str(inventory), playbook, extra)


def check_run(inventory: str, playbook: Path, extra: dict, check: bool = True) -> tuple[int, str]:
    """ansible-playbook (--check unless told otherwise): its exit code and output."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    mode = ["--check"] if check else []
    result = subprocess.run(
        ["ansible-playbook", *mode, "-i", inventory, str(playbook), "-e", json.dumps(extra)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr


def test_required_hca_absent_fails_naming_the_group(tmp_path):
    rc, out = run_role(tmp_path, "doca_ofed", {}, group="rdma_nodes")
    assert rc == 2, out
    assert "has no Mellanox/NVIDIA HCA" in out and "it is in group rdma_nodes" in out, out


def test_the_hca_group_is_a_variable(tmp_path):
    rc, out = run_role(tmp_path, "doca_ofed", {"doca_ofed_hca_group": "site_rdma"}, group="site_rdma")
    assert rc == 2, out
    assert "it is in group site_rdma" in out and "take the host out of site_rdma" in out, out


def test_required_hca_absent_fails_naming_the_variable(tmp_path):
    rc, out = run_role(tmp_path, "doca_ofed", {"doca_ofed_require_hca": True})
    assert rc == 2, out
    assert "doca_ofed_require_hca is true" in out, out


def test_absent_hca_skips_in_one_line(tmp_path):
    rc, out = run_role(tmp_path, "doca_ofed", {})
    assert rc == 0, out
    assert "has no Mellanox/NVIDIA HCA" in out and "skipped" in out, out
    assert "changed=0" in out


def test_an_intel_nic_is_not_an_hca_but_a_connectx_is(tmp_path):
    sysfs = tmp_path / "sys"
    for address, vendor, cls in [
        ("0000:17:00.0", "0x8086", "0x020000"),
        ("0000:3b:00.0", "0x15b3", "0x020700"),
    ]:
        device = sysfs / "bus/pci/devices" / address
        device.mkdir(parents=True)
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text(cls + "\n")
    rc, out = run_role(tmp_path, "doca_ofed", {"doca_ofed_require_hca": True, "doca_ofed_hw_root": "/nonexistent"})
    assert rc == 2, out
    trusted = {"doca_ofed_require_hca": True, "doca_ofed_repo_trusted": True}
    rc, out = run_role(tmp_path, "doca_ofed", trusted, sysfs=sysfs)
    assert "has no Mellanox/NVIDIA HCA" not in out, out
    assert rc == 0 and "Add the pinned repository" in out, out


def test_a_registered_rdma_device_of_no_mellanox_function_is_an_hca(tmp_path):
    """As before the module did the detection: any RDMA device the kernel registered counts (here soft RoCE)."""
    (tmp_path / "sys/class/infiniband/rxe0").mkdir(parents=True)
    rc, out = run_role(tmp_path, "doca_ofed", {"doca_ofed_require_hca": True, "doca_ofed_repo_trusted": True})
    assert "has no Mellanox/NVIDIA HCA" not in out, out
    assert rc == 0 and "Add the pinned repository" in out, out


MALFORMED = [
    ("doca_ofed", {"doca_ofed_flavour": "ofed"}, "doca_ofed_flavour"),
    ("doca_ofed", {"doca_ofed_version": "2.9 beta"}, "- doca_ofed_version must be a release like 2.9.1"),
    (
        "doca_ofed",
        {"doca_ofed_base_url": "ftp://mirror"},
        "- doca_ofed_repo_url must be a http/https/file URL",
    ),
    (
        "doca_ofed",
        {"doca_ofed_extra_packages": ["Bad Name"]},
        "- doca_ofed_extra_packages[0] must be a Debian package name, got 'Bad Name'",
    ),
    ("gpudirect", {"gpudirect_mode": "rdma"}, "gpudirect_mode"),
    (
        "gpudirect",
        {"gpudirect_kernel_args": ["iommu pt"]},
        "- gpudirect_kernel_args[0] must be a kernel argument like iommu=pt, got 'iommu pt'",
    ),
    (
        "gpudirect",
        {"gpudirect_gdrcopy_version": "latest!"},
        "- gpudirect_gdrcopy_version must be a Debian package version",
    ),
    (
        "sriov_vfs",
        {"sriov_vfs_pfs": [{"pci_address": "3b:00.0", "num_vfs": 8}]},
        "- sriov_vfs_pfs[0].pci_address must be a PCI address like 0000:3b:00.0, got '3b:00.0'",
    ),
    (
        "sriov_vfs",
        {"sriov_vfs_pfs": [{"pci_address": "0000:3b:00.0", "num_vfs": 200}]},
        "- sriov_vfs_pfs[0].num_vfs must be between 0 and 127, got 200",
    ),
    ("sriov_vfs", {"sriov_vfs_pfs": [{"pci_address": "0000:3b:00.0"}]}, "num_vfs"),
    ("roce_qos", {"roce_qos_pfc_priority": 9}, "- roce_qos_pfc_priority must be between 0 and 7, got 9"),
    (
        "roce_qos",
        {"roce_qos_rails": [{"netdev": "rail0", "mtu": 100}]},
        "- roce_qos_rails[0].mtu must be between 1280 and 9216, got 100",
    ),
    ("roce_qos", {"roce_qos_trust": "cos"}, "roce_qos_trust"),
]


@pytest.mark.parametrize(("role", "variables", "message"), MALFORMED, ids=[m[2][:40] for m in MALFORMED])
def test_malformed_input_fails_before_any_change(tmp_path, role, variables, message):
    rc, out = run_role(tmp_path, role, variables)
    assert rc == 2, out
    assert message in out, out
    if message.startswith("- "):  # a line of the one message of railforge_role_input
        assert f"Invalid input for role {role} (nothing was changed):\n" in out, out
    assert "changed=0" in out, out


def fake_connectx8(sysfs: Path) -> None:
    device = sysfs / "bus/pci/devices/0000:3b:00.0"
    device.mkdir(parents=True)
    for name, value in (("vendor", "0x15b3"), ("class", "0x020700"), ("device", "0x1023")):
        (device / name).write_text(value + "\n")


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"doca_ofed_version": "2.9.1"}, "DOCA-Host 2.9.1 does not drive"),
        ({"doca_ofed_flavour": "mlnx_ofed"}, "MLNX_OFED does not support (ConnectX-7 is its last generation)"),
    ],
)
def test_connectx8_refused_by_a_stack_that_cannot_drive_it(tmp_path, variables, message):
    fake_connectx8(tmp_path / "sys")
    rc, out = run_role(tmp_path, "doca_ofed", variables)
    assert rc == 2, out
    assert "has ConnectX-8 (0000:3b:00.0)" in out and message in out, out
    assert "changed=0" in out, out


def test_connectx8_taken_by_the_default_release(tmp_path):
    fake_connectx8(tmp_path / "sys")
    rc, out = run_role(tmp_path, "doca_ofed", {"doca_ofed_repo_trusted": True})
    assert rc == 0 and "Add the pinned repository" in out, out


def test_gdrcopy_check_run_before_its_apt_source_says_so_instead_of_hiding_a_failure(tmp_path):
    """A check run cannot preview packages of a source not added yet: one line, no failure hidden by ignore_errors."""
    variables = {"ansible_python_interpreter": sys.executable, "gpudirect_gdrcopy_source": "apt"}
    rc, out = check_run("localhost,", gdrcopy_playbook(tmp_path), variables)
    assert rc == 0, out
    assert "GDRCopy 2.5.1-1 is not in an apt source yet" in out, out
    assert "ignoring" not in out and "failed=0" in out, out


def test_gdrcopy_url_without_pinned_checksums_stops_the_role_before_any_change(tmp_path):
    """NVIDIA publishes no checksums and roles/versions pins none: the default source url refuses every file."""
    rc, out = run_role(tmp_path, "gpudirect", {})
    assert rc == 2, out
    unpinned = re.search(r"gpudirect_gdrcopy_sha256: no sha256 pinned for (\S+), (\S+) \(gpudirect_gdrcopy_source", out)
    assert unpinned, out
    assert [name.split("_")[0] for name in unpinned.groups()] == ["gdrdrv-dkms", "libgdrapi"], out
    assert all(
        re.match(r"^[a-z-]+_2\.5\.1-1_(amd64|arm64)\.[A-Z][a-z]+[0-9_]+\.deb$", name) for name in unpinned.groups()
    )
    assert "or set gpudirect_gdrcopy_source: apt with gpudirect_gdrcopy_repo_url" in out, out
    assert "changed=0" in out, out
    # Pinned, the same run goes on: a check run before the files exist says so in one line.
    pins = {name: "sha256:" + "0" * 64 for name in unpinned.groups()}
    rc, out = run_role(tmp_path, "gpudirect", {"gpudirect_gdrcopy_sha256": pins, "gpudirect_acs": "keep"})
    assert rc == 0, out
    assert "GDRCopy 2.5.1-1 is not downloaded yet" in out and "checks each sha256" in out, out


@pytest.mark.parametrize(
    ("pins", "message"),
    [
        (
            {"libgdrapi_2.5.1-1_amd64.Ubuntu24_04.deb": "md5:0123"},
            "libgdrapi_2.5.1-1_amd64.Ubuntu24_04.deb: 'md5:0123'",
        ),
        ({"libgdrapi_2.5.1-1_amd64.Ubuntu24_04.deb": 12}, "libgdrapi_2.5.1-1_amd64.Ubuntu24_04.deb: 12"),
    ],
)
def test_gdrcopy_checksum_that_is_no_sha256_is_refused(tmp_path, pins, message):
    rc, out = run_role(tmp_path, "gpudirect", {"gpudirect_gdrcopy_sha256": pins, "gpudirect_gdrcopy_source": "apt"})
    assert rc == 2, out
    assert "Invalid input for role gpudirect (nothing was changed):\n" in out, out
    expected = "- gpudirect_gdrcopy_sha256 must be file names mapped to sha256: and 64 lowercase hex digits, not "
    assert expected + message in out, out


def gdrcopy_mirror(tmp_path: Path) -> tuple[Path, dict]:
    """A mirror laid out like NVIDIA's downloads, with two files that are no packages (apt could not install them)."""
    directory = tmp_path / "mirror/CUDA 12.8/ubuntu24_04/x64"
    directory.mkdir(parents=True)
    files = {}
    for package in ("gdrdrv-dkms", "libgdrapi"):
        name = f"{package}_2.5.1-1_amd64.Ubuntu24_04.deb"
        (directory / name).write_bytes(f"not a package: {package}\n".encode())
        files[name] = "sha256:" + hashlib.sha256((directory / name).read_bytes()).hexdigest()
    return tmp_path / "mirror", files


def gdrcopy_playbook(tmp_path: Path) -> Path:
    """A play of the role's GDRCopy tasks alone, on this machine."""
    playbook = tmp_path / "gdrcopy.yml"
    playbook.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: true\n  tasks:\n"
        "    - ansible.builtin.include_role: {name: gpudirect, tasks_from: gdrcopy.yml}\n"
    )
    return playbook


def run_gdrcopy_tasks(tmp_path: Path, variables: dict, check: bool) -> tuple[int, str]:
    extra = {"ansible_python_interpreter": sys.executable, "gpudirect_gdrcopy_os": "ubuntu24_04", **variables}
    return check_run("localhost,", gdrcopy_playbook(tmp_path), extra, check=check)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the mirror holds the x64 directory")
def test_gdrcopy_file_whose_sha256_differs_from_its_pin_is_not_kept_and_nothing_installed(tmp_path):
    mirror, pins = gdrcopy_mirror(tmp_path)
    kept = tmp_path / "kept"
    wrong = {**pins, "libgdrapi_2.5.1-1_amd64.Ubuntu24_04.deb": "sha256:" + "0" * 64}
    variables = {"gpudirect_gdrcopy_base_url": f"file://{mirror}", "gpudirect_gdrcopy_download_dir": str(kept)}
    rc, out = run_gdrcopy_tasks(tmp_path, {**variables, "gpudirect_gdrcopy_sha256": wrong}, check=False)
    assert rc == 2, out
    assert "TASK [gpudirect : Install the checked GDRCopy files]" not in out, out
    assert re.search(r"The checksum for \S+ did not match 0{64}; it was [0-9a-f]{64}", out), out
    # The first file matched its pin and is kept; the second is not, and the install never started.
    assert sorted(path.name for path in kept.iterdir()) == ["gdrdrv-dkms_2.5.1-1_amd64.Ubuntu24_04.deb"]
    # A check run with the right pins fetches nothing new and predicts no install of files not yet kept.
    rc, out = run_gdrcopy_tasks(tmp_path, {**variables, "gpudirect_gdrcopy_sha256": pins}, check=True)
    assert rc == 0, out
    assert "GDRCopy 2.5.1-1 is not downloaded yet" in out and "libgdrapi_2.5.1-1_amd64.Ubuntu24_04.deb" in out, out
    assert sorted(path.name for path in kept.iterdir()) == ["gdrdrv-dkms_2.5.1-1_amd64.Ubuntu24_04.deb"]
