"""Checks of the RDMA node roles: doca_ofed, gpudirect, sriov_vfs, roce_qos.

The persisted configuration (packages, sources, units, modprobe and grub files, firmware settings) is checked
everywhere, Molecule containers included; the live hardware state (ports, modules, VFs, MTU, PFC) only on real
nodes (`hardware` marker).
"""

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins/module_utils"))
from railforge_hwparse import parse_mlxconfig_query

pytestmark = pytest.mark.rdma

SOURCE = "/etc/apt/sources.list.d/railforge-doca-ofed.list"
PEERMEM_FILES = ("/etc/modules-load.d/railforge-gpudirect.conf", "/etc/modprobe.d/railforge-gpudirect.conf")


@pytest.fixture(scope="module")
def has_hca(host, hostvars) -> bool:
    root = hostvars["doca_ofed_hw_root"].rstrip("/") + "/sys"
    scan = host.run(
        f"for d in {root}/bus/pci/devices/*; do echo $(cat $d/vendor):$(cat $d/class); done 2>/dev/null;"
        f" ls {root}/class/infiniband 2>/dev/null"
    ).stdout
    return bool(re.search(r"^0x15b3:0x020[07]..$", scan, re.M)) or bool(
        [line for line in scan.splitlines() if ":" not in line]
    )


@pytest.fixture(scope="module")
def rdma_node(hostvars) -> bool:
    return "rdma_nodes" in hostvars.get("group_names", [])


@pytest.fixture(scope="module")
def in_vm(host, in_container) -> bool:
    """A VM of its own (as the roles see it): a container counts as a container even on a VM host."""
    return not in_container and host.run("systemd-detect-virt --vm").rc == 0


@pytest.fixture(scope="module")
def doca_ofed_wanted(hostvars) -> tuple[str, str]:
    """Meta package and release the doca_ofed role installs (its defaults are templates, rendered here)."""
    doca = hostvars["doca_ofed_flavour"] == "doca"
    package = hostvars["doca_ofed_package"]
    if "{{" in package:
        package = "doca-ofed" if doca else "mlnx-ofed-basic"
    return package, hostvars["doca_ofed_version" if doca else "doca_ofed_mlnx_ofed_version"]


@pytest.fixture
def real_hardware(in_container) -> None:
    if in_container:
        pytest.skip("container: no HCA or GPU of its own; checked on real nodes")


@pytest.fixture(scope="module")
def gpudirect_mode(host, hostvars) -> str:
    if hostvars["gpudirect_mode"] != "auto":
        return hostvars["gpudirect_mode"]
    version = host.file(hostvars["gpudirect_hw_root"].rstrip("/") + "/proc/driver/nvidia/version")
    kernel = tuple(int(part) for part in re.findall(r"\d+", host.check_output("uname -r"))[:2])
    open_modules = version.exists and "Open Kernel Module" in version.content_string
    return "dmabuf" if kernel >= (5, 12) and open_modules else "peermem"


def test_nothing_installed_without_hca(host, doca_ofed_wanted, has_hca):
    if has_hca:
        pytest.skip("this node has an HCA")
    assert not host.package(doca_ofed_wanted[0]).is_installed
    assert not host.file(SOURCE).exists


def test_doca_ofed_installed_at_pinned_version(host, doca_ofed_wanted, has_hca):
    if not has_hca:
        pytest.skip("no HCA on this node")
    name, wanted = doca_ofed_wanted
    package = host.package(name)
    assert package.is_installed
    assert re.match(rf"{re.escape(wanted)}([-.+~]|$)", package.version), package.version


def test_repository_pinned_to_the_version(host, hostvars, doca_ofed_wanted, has_hca):
    source = host.file(SOURCE)
    if not has_hca or not source.exists:
        pytest.skip("no HCA, or the stack was already installed (left alone, no source written)")
    line = next(ln for ln in source.content_string.splitlines() if ln.startswith("deb "))
    if hostvars["doca_ofed_flavour"] == "doca":
        assert f"{hostvars['doca_ofed_base_url']}/{doca_ofed_wanted[1]}/" in line
    else:
        assert f"{hostvars['doca_ofed_mlnx_ofed_base_url']}/{doca_ofed_wanted[1]}/" in line
    assert line.endswith(" ./")


def test_repository_signature_checked_by_apt(host, hostvars, has_hca, check_signed_apt_source):
    if not has_hca or not host.file(SOURCE).exists or hostvars["doca_ofed_repo_trusted"]:
        pytest.skip("no HCA, the stack was already installed (no source written), or a trusted source asked for")
    check_signed_apt_source(SOURCE)


def test_openibd_enabled_where_the_role_installed_the_stack(host, has_hca):
    if not has_hca or not host.file(SOURCE).exists:
        pytest.skip("no HCA, or the stack was already installed (left alone)")
    assert host.service("openibd").is_enabled


def test_peermem_persisted_or_absent_with_dmabuf(host, rdma_node, gpudirect_mode):
    if not rdma_node:
        pytest.skip("not an RDMA node")
    if gpudirect_mode == "dmabuf":
        for path in PEERMEM_FILES:
            assert not host.file(path).exists, path
        return
    assert "nvidia-peermem" in host.file(PEERMEM_FILES[0]).content_string.split()
    assert "softdep nvidia-peermem pre: nvidia ib_core" in host.file(PEERMEM_FILES[1]).content_string


def test_gdrcopy_pinned(host, hostvars, rdma_node):
    if not rdma_node or not hostvars["gpudirect_gdrcopy_enabled"]:
        pytest.skip("GDRCopy not wanted here")
    for name in hostvars["gpudirect_gdrcopy_packages"]:
        assert host.package(name).version == hostvars["gpudirect_gdrcopy_version"], name


def test_gdrcopy_repository_signature_checked_by_apt(host, hostvars, rdma_node, check_signed_apt_source):
    wanted = hostvars["gpudirect_gdrcopy_enabled"] and hostvars["gpudirect_gdrcopy_source"] == "apt"
    if (
        not rdma_node
        or not wanted
        or not hostvars["gpudirect_gdrcopy_repo_url"]
        or hostvars["gpudirect_gdrcopy_repo_trusted"]
    ):
        pytest.skip("GDRCopy from its .deb files, from a source the node had, or from a trusted one here")
    check_signed_apt_source("/etc/apt/sources.list.d/railforge-gdrcopy.list")


def test_gdrcopy_files_kept_are_the_installed_packages(host, hostvars, rdma_node):
    """Source url: the files downloaded and checked against their pins are what dpkg installed."""
    if not rdma_node or not hostvars["gpudirect_gdrcopy_enabled"] or hostvars["gpudirect_gdrcopy_source"] != "url":
        pytest.skip("GDRCopy not from its .deb files here")
    for name in hostvars["gpudirect_gdrcopy_packages"]:
        (kept,) = host.run(f"ls /var/cache/railforge/gdrcopy/{name}_*.deb").stdout.split()
        fields = host.run(f"dpkg-deb --field {kept} Package Version").stdout
        assert f"Package: {name}" in fields and f"Version: {host.package(name).version}" in fields, fields


def test_acs_unit_only_where_acs_is_disabled(host, hostvars, rdma_node, in_vm):
    if not rdma_node:
        pytest.skip("not an RDMA node")
    wanted = hostvars["gpudirect_acs"] == "disable" or (hostvars["gpudirect_acs"] == "auto" and not in_vm)
    unit = host.file("/etc/systemd/system/railforge-acs-off.service")
    if wanted:
        assert host.service("railforge-acs-off").is_enabled
        assert host.file("/usr/local/libexec/railforge/acs-off").mode == 0o755
    else:
        assert not unit.exists


def test_iommu_passthrough_in_grub_drop_in(host, hostvars, rdma_node):
    if not rdma_node:
        pytest.skip("not an RDMA node")
    drop_in = host.file("/etc/default/grub.d/90-railforge-iommu.cfg")
    if not hostvars["gpudirect_iommu_passthrough"]:
        assert not drop_in.exists
        return
    line = re.search(r'^GRUB_CMDLINE_LINUX_DEFAULT="(.*)"$', drop_in.content_string, re.M).group(1)
    assert line.startswith("${GRUB_CMDLINE_LINUX_DEFAULT} ")
    assert set(hostvars["gpudirect_kernel_args"]) <= set(line.split())


def test_sriov_firmware_settings(host, hostvars):
    if not hostvars["sriov_vfs_pfs"] or not hostvars["sriov_vfs_manage_firmware"]:
        pytest.skip("no PFs, or firmware not managed")
    for pf in hostvars["sriov_vfs_pfs"]:
        out = host.check_output(f"mlxconfig -d {pf['pci_address']} q SRIOV_EN NUM_OF_VFS LINK_TYPE_P1")
        device = parse_mlxconfig_query(out)[0]
        assert device["sriov_en"] is True
        assert device["num_of_vfs"] == pf["num_vfs"]
        if pf.get("link_type"):
            assert device["link_types"]["P1"] == pf["link_type"].upper()


def test_firmware_values_written_once(host):
    """Stand-in mlxconfig only: query first, so no value is written twice, nor one that was already right."""
    log = host.file("/var/log/standin-mlxconfig.log")
    if not log.exists:
        pytest.skip("real mlxconfig keeps no log of writes")
    writes = [line.split("=")[0] for line in log.content_string.splitlines()]
    assert len(writes) == len(set(writes)), writes
    assert "0000:3b:00.0 SRIOV_EN" not in writes, "SRIOV_EN was already on and still written"


def test_vfs_created_at_boot(host, hostvars):
    if not hostvars["sriov_vfs_pfs"]:
        pytest.skip("no PFs")
    assert host.service("railforge-sriov-vfs").is_enabled
    conf = host.file("/etc/railforge/sriov-vfs.conf").content_string
    for pf in hostvars["sriov_vfs_pfs"]:
        assert re.search(rf"^{re.escape(pf['pci_address'])} {pf['num_vfs']} (yes|no)$", conf, re.M)


def test_roce_qos_applied_at_boot(host, hostvars):
    if not hostvars["roce_qos_rails"]:
        pytest.skip("no RoCE rails")
    assert host.service("railforge-roce-qos").is_enabled
    conf = host.file("/etc/railforge/roce-qos.conf").content_string
    rails = re.search(r'^RAILS="(.*)"$', conf, re.M).group(1).split()
    mtu = hostvars["roce_qos_mtu"]
    assert rails == [f"{rail['netdev']}:{rail.get('mtu', mtu)}" for rail in hostvars["roce_qos_rails"]]
    assert f"PFC_PRIORITY={hostvars['roce_qos_pfc_priority']}" in conf.splitlines()
    assert f"TRUST={hostvars['roce_qos_trust']}" in conf.splitlines()


@pytest.mark.hardware
@pytest.mark.usefixtures("real_hardware")
def test_hca_ports_active(host, hostvars, rdma_node):
    if not rdma_node:
        pytest.skip("not an RDMA node")
    layer = {"infiniband": "InfiniBand", "ethernet": "Ethernet"}[hostvars["railforge_rdma_link_layer"]]
    for hca in hostvars["railforge_rdma_hcas"]:
        port = f"/sys/class/infiniband/{hca}/ports/1"
        assert "ACTIVE" in host.file(f"{port}/state").content_string, hca
        assert host.file(f"{port}/link_layer").content_string.strip() == layer, hca
        if "railforge_rdma_rate_gbps" in hostvars:
            rate = float(host.file(f"{port}/rate").content_string.split()[0])
            assert rate == hostvars["railforge_rdma_rate_gbps"], hca


@pytest.mark.hardware
@pytest.mark.usefixtures("real_hardware")
def test_gpudirect_usable(host, rdma_node, gpudirect_mode):
    if not rdma_node:
        pytest.skip("not an RDMA node")
    loaded = {line.split()[0] for line in host.check_output("lsmod").splitlines()[1:]}
    assert "nvidia" in loaded
    if gpudirect_mode == "peermem":
        assert "nvidia_peermem" in loaded
    else:
        assert "Open Kernel Module" in host.file("/proc/driver/nvidia/version").content_string


@pytest.mark.hardware
@pytest.mark.usefixtures("real_hardware")
def test_vf_count_per_pf(host, hostvars):
    for pf in hostvars["sriov_vfs_pfs"]:
        numvfs = host.file(f"/sys/bus/pci/devices/{pf['pci_address']}/sriov_numvfs").content_string
        assert int(numvfs) == pf["num_vfs"], pf["pci_address"]


@pytest.mark.hardware
@pytest.mark.usefixtures("real_hardware")
def test_rail_mtu_and_pfc(host, hostvars):
    for rail in hostvars["roce_qos_rails"]:
        mtu = int(host.file(f"/sys/class/net/{rail['netdev']}/mtu").content_string)
        assert mtu == rail.get("mtu", hostvars["roce_qos_mtu"]), rail["netdev"]
        qos = host.check_output(f"mlnx_qos -i {rail['netdev']}")
        enabled = re.search(r"PFC configuration:.*?enabled\s+([01 \t]+)", qos, re.S).group(1).split()
        wanted = ["1" if prio == hostvars["roce_qos_pfc_priority"] else "0" for prio in range(8)]
        assert enabled == wanted, rail["netdev"]
