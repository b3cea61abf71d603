"""The boot-time scripts of the RDMA roles against fake sysfs trees, with ip, setpci and mlnx_qos recorded."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ACS_OFF = ROOT / "roles/gpudirect/files/railforge-acs-off"
SRIOV_VFS = ROOT / "roles/sriov_vfs/files/railforge-sriov-vfs"
ROCE_QOS = ROOT / "roles/roce_qos/files/railforge-roce-qos"


def recorder(tmp_path: Path, name: str, script: str = "") -> Path:
    """A stand-in command that logs its arguments to <name>.log (and runs `script` for special cases)."""
    tool = tmp_path / "bin" / name
    tool.parent.mkdir(exist_ok=True)
    tool.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/{name}.log\n{script}\n')
    tool.chmod(0o755)
    return tool


def calls(tmp_path: Path, name: str) -> list[str]:
    log = tmp_path / f"{name}.log"
    return log.read_text().splitlines() if log.exists() else []


def run(script: Path, sysfs: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "RAILFORGE_SYSFS": str(sysfs),
        "IP": str(tmp_path / "bin/ip"),
        "SETPCI": str(tmp_path / "bin/setpci"),
    }
    return subprocess.run([str(script), *args], capture_output=True, text=True, env=env, check=False)


def pci_function(sysfs: Path, path: str, vendor: str, cls: str) -> Path:
    """Create devices/<path> (path = root complex/bridge/.../function) and its bus/pci/devices link."""
    device = sysfs / "devices" / path
    device.mkdir(parents=True)
    (device / "vendor").write_text(vendor + "\n")
    (device / "class").write_text(cls + "\n")
    link = sysfs / "bus/pci/devices" / device.name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(device)
    return device


def test_acs_disabled_on_bridges_above_gpus_and_hcas_only(tmp_path):
    sysfs = tmp_path / "sys"
    pci_function(sysfs, "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0", "0x10de", "0x030200")  # GPU
    pci_function(sysfs, "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0", "0x15b3", "0x020700")  # HCA
    pci_function(sysfs, "pci0000:80/0000:80:02.0/0000:81:00.0", "0x8086", "0x010802")  # NVMe: left alone
    # 0000:00:01.0 has no ACS capability: the read fails, so it is not written.
    recorder(tmp_path, "setpci", 'case "$*" in *00:01.0*ECAP_ACS+0x6.w) exit 1;; esac')
    result = run(ACS_OFF, sysfs, tmp_path)
    assert result.returncode == 0, result.stderr
    writes = [c for c in calls(tmp_path, "setpci") if c.endswith("=0000")]
    assert writes == ["-s 0000:01:00.0 ECAP_ACS+0x6.w=0000"]
    assert "ACS disabled on 0000:01:00.0" in result.stdout


def sriov_pf(sysfs: Path, address: str, total: int, link_layer: str | None = None) -> Path:
    pf = pci_function(sysfs, f"pci0000:00/{address}", "0x15b3", "0x020700")
    (pf / "sriov_totalvfs").write_text(f"{total}\n")
    (pf / "sriov_numvfs").write_text("0\n")
    (pf / "net/ib0").mkdir(parents=True)
    if link_layer:
        port = pf / "infiniband/mlx5_0/ports/1"
        port.mkdir(parents=True)
        (port / "link_layer").write_text(link_layer + "\n")
        (pf / "infiniband/mlx5_0/node_guid").write_text("0c42:a103:0012:3456\n")
    return pf


def test_vfs_created_and_ib_guids_derived_from_the_pf(tmp_path):
    sysfs = tmp_path / "sys"
    pf = sriov_pf(sysfs, "0000:3b:00.0", 16, "InfiniBand")
    conf = tmp_path / "sriov-vfs.conf"
    conf.write_text("# comment\n0000:3b:00.0 2 yes\n")
    recorder(tmp_path, "ip")
    result = run(SRIOV_VFS, sysfs, tmp_path, str(conf))
    assert result.returncode == 0, result.stderr
    assert (pf / "sriov_numvfs").read_text().strip() == "2"
    assert calls(tmp_path, "ip") == [
        "link set dev ib0 vf 0 node_guid 0e:01:a1:03:00:12:34:56 port_guid 0e:01:a1:03:00:12:34:56",
        "link set dev ib0 vf 1 node_guid 0e:02:a1:03:00:12:34:56 port_guid 0e:02:a1:03:00:12:34:56",
    ]


def test_vfs_left_alone_when_right_and_errors_named(tmp_path):
    sysfs = tmp_path / "sys"
    pf = sriov_pf(sysfs, "0000:3b:00.0", 8, "Ethernet")
    (pf / "sriov_numvfs").write_text("4\n")
    sriov_pf(sysfs, "0000:5e:00.0", 2)
    conf = tmp_path / "sriov-vfs.conf"
    conf.write_text("0000:3b:00.0 4 yes\n0000:5e:00.0 8 no\n0000:af:00.0 1 no\n")
    recorder(tmp_path, "ip")
    result = run(SRIOV_VFS, sysfs, tmp_path, str(conf))
    assert result.returncode == 1
    assert (pf / "sriov_numvfs").read_text().strip() == "4"
    assert calls(tmp_path, "ip") == []  # Ethernet: no GUIDs
    assert "0000:5e:00.0 supports 2 VFs, 8 wanted" in result.stderr
    assert "0000:af:00.0 has no SR-IOV" in result.stderr


@pytest.mark.parametrize("priority", [3, 0])
def test_roce_qos_applies_mtu_trust_pfc_ecn(tmp_path, priority):
    sysfs = tmp_path / "sys"
    for netdev in ("rail0", "rail1"):
        for point in ("roce_np", "roce_rp"):
            flags = sysfs / f"class/net/{netdev}/ecn/{point}/enable"
            flags.mkdir(parents=True)
            (flags / str(priority)).write_text("0\n")
    recorder(tmp_path, "ip")
    mlnx_qos = recorder(tmp_path, "mlnx_qos")
    conf = tmp_path / "roce-qos.conf"
    conf.write_text(
        f"TRUST=dscp\nPFC_PRIORITY={priority}\nECN=1\nTRAFFIC_CLASS=106\nMLNX_QOS={mlnx_qos}\n"
        'RAILS="rail0:9000 rail1:4200 missing0:9000"\n'
    )
    result = run(ROCE_QOS, sysfs, tmp_path, str(conf))
    assert result.returncode == 1
    assert "no interface missing0" in result.stderr
    assert calls(tmp_path, "ip") == ["link set dev rail0 mtu 9000", "link set dev rail1 mtu 4200"]
    pfc = ",".join("1" if p == priority else "0" for p in range(8))
    assert calls(tmp_path, "mlnx_qos") == [f"-i rail{n} --trust dscp --pfc {pfc}" for n in (0, 1)]
    assert (sysfs / f"class/net/rail1/ecn/roce_rp/enable/{priority}").read_text().strip() == "1"
