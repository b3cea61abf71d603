"""railforge_hwfacts against sysfs trees built from the machine shapes in shapes.py."""

from __future__ import annotations

import os

import pytest
from ansible.module_utils.railforge_hwfacts import (
    ParseError,
    gather_device_facts,
    gather_hw_facts,
    gpu_architecture,
    pci_link,
    read_sysfs,
)
from ansible.module_utils.railforge_hwparse import parse_nvidia_smi_topo
from shapes import SHAPES, realdata

from railforge.hwsim import SysfsBuilder, build


@pytest.fixture(scope="module")
def trees(shape_trees):
    return shape_trees


EXPECTED = {
    "dgx_a100": {
        "gpus": 8,
        "arch": ["Ampere"],
        "hcas": 17,
        "rails": ["mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11", "mlx5_14", "mlx5_15"],
        "shared": {},
        "layers": ["InfiniBand"],
        "nvswitch": 6,
        "iface": "bond0",
        "link0": "PXB",
    },
    "dgx_h100": {
        "gpus": 8,
        "arch": ["Hopper"],
        "hcas": 11,
        "rails": ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_8", "mlx5_9", "mlx5_10"],
        "shared": {},
        "layers": ["InfiniBand"],
        "nvswitch": 4,
        "iface": "enp170s0np0",
        "link0": "PIX",
    },
    "hgx_h100_12nic": {
        "gpus": 8,
        "arch": ["Hopper"],
        "hcas": 12,
        "rails": ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"],
        "shared": {},
        "layers": ["InfiniBand"],
        "nvswitch": 0,
        "iface": "eth0",
        "link0": "PIX",
    },
    # No subnet manager yet: the IB ports are INIT. No rails at all (not the two active Ethernet ports), loudly.
    "hgx_h100_12nic_sm_down": {
        "gpus": 8,
        "arch": ["Hopper"],
        "hcas": 12,
        "rails": [],
        "shared": {},
        "layers": [],
        "nvswitch": 0,
        "iface": "eth0",
        "link0": None,
        "warnings": [
            "InfiniBand HCA ports not ACTIVE are no rails: mlx5_0 (INIT), mlx5_3 (INIT), mlx5_4 (INIT), mlx5_5 (INIT),"
            " mlx5_6 (INIT), mlx5_9 (INIT), mlx5_10 (INIT), mlx5_11 (INIT); no rails at all (is the subnet manager"
            " up? are the links cabled?)"
        ],
    },
    # One socket's IB ports INIT: its GPUs use the other socket's IB HCAs (SYS, shared), never Ethernet.
    "hgx_h100_12nic_sm_partial": {
        "gpus": 8,
        "arch": ["Hopper"],
        "hcas": 12,
        "rails": ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5"],
        "shared": {"mlx5_0": [0, 4], "mlx5_3": [1, 5], "mlx5_4": [2, 6], "mlx5_5": [3, 7]},
        "layers": ["InfiniBand"],
        "nvswitch": 0,
        "iface": "eth0",
        "link0": "PIX",
        "warnings": [
            "InfiniBand HCA ports not ACTIVE are no rails: mlx5_6 (INIT), mlx5_9 (INIT), mlx5_10 (INIT), mlx5_11 (INIT)"
        ],
    },
    "pcie_2gpu": {
        "gpus": 2,
        "arch": ["Ampere"],
        "hcas": 1,
        "rails": ["mlx5_0"],
        "shared": {"mlx5_0": [0, 1]},
        "layers": ["InfiniBand"],
        "nvswitch": 0,
        "iface": "eno1",
        "link0": "SYS",
    },
    "pcie_4gpu": {
        "gpus": 4,
        "arch": ["Ampere"],
        "hcas": 2,
        "rails": ["mlx5_0", "mlx5_1"],
        "shared": {"mlx5_0": [0, 2], "mlx5_1": [1, 3]},
        "layers": ["InfiniBand"],
        "nvswitch": 0,
        "iface": "eno1",
        "link0": "NODE",
    },
    "roce_node": {
        "gpus": 1,
        "arch": ["Ampere"],
        "hcas": 2,
        "rails": ["mlx5_0"],
        "shared": {},
        "layers": ["Ethernet"],
        "nvswitch": 0,
        "iface": "eno1",
        "link0": "PHB",
        "roce_v2": True,
        # ens192f1 is Down in the EGX paste: its port is no rail, and the facts say so.
        "warnings": ["Ethernet HCA ports not ACTIVE are no rails: mlx5_1 (DOWN)"],
    },
    "mixed_roce_ib": {
        "gpus": 1,
        "arch": ["Ampere"],
        "hcas": 4,
        "rails": ["mlx5_2"],
        "shared": {},
        "layers": ["InfiniBand"],
        "nvswitch": 0,
        "iface": "eno1",
        "link0": "NODE",
        # Two RoCE and two IB functions: the tie goes to InfiniBand, said so; the IB port that is DOWN is named.
        # (NCCL itself mixed them on this node: 'NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_2:1/IB'.)
        "warnings": [
            "as many Ethernet as InfiniBand HCAs (2 each): rails use InfiniBand; set mix_link_layers to let "
            "proximity choose across link layers",
            "InfiniBand HCA ports not ACTIVE are no rails: mlx5_3 (DOWN)",
        ],
    },
    "no_rdma": {
        "gpus": 2,
        "arch": ["Blackwell"],
        "hcas": 0,
        "rails": [],
        "shared": {},
        "layers": [],
        "nvswitch": 0,
        "iface": "enp5s0",
        "link0": None,
    },
}


def test_every_shape_has_expectations():
    assert set(SHAPES) == set(EXPECTED)
    assert len(SHAPES) >= 6


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shape_facts(trees, name):
    exp = EXPECTED[name]
    f = gather_hw_facts(trees[name])
    assert f["gpu_count"] == exp["gpus"]
    assert [g["index"] for g in f["gpus"]] == list(range(exp["gpus"]))
    assert f["gpus"] == sorted(f["gpus"], key=lambda g: g["pci_address"])
    assert f["gpu_architectures"] == exp["arch"]
    assert f["hca_count"] == exp["hcas"]
    assert f["rail_hcas"] == exp["rails"] and f["rail_count"] == len(exp["rails"])
    assert f["shared_hcas"] == exp["shared"]
    assert f["rdma_link_layers"] == exp["layers"]
    assert f["roce_v2"] is exp.get("roce_v2", False)
    assert f["nvlink"]["nvswitch_count"] == exp["nvswitch"]
    assert f["nvlink"]["present"] is bool(exp["nvswitch"])
    assert f["default_interface"] == exp["iface"]
    assert f["affinity_source"] == "sysfs" and f["warnings"] == exp.get("warnings", [])
    if exp["rails"]:
        assert f["rails"][0]["link"] == exp["link0"]
        for r in f["rails"]:
            assert r["shared_with"] == [i for i in exp["shared"].get(r["hca"], []) if i != r["gpu"]]
    # numa of every device is known in these trees
    assert all(g["numa_node"] is not None for g in f["gpus"])
    assert all(h["numa_node"] is not None for h in f["hcas"])


def _sysfs_matrix_vs_topo(f, topo):
    """(sysfs value, topo value) for every GPU x NIC cell."""
    out = {}
    for g in topo["gpus"]:
        for nic in topo["nics"]:
            dev = topo["nic_devices"][nic]
            out[(g, dev)] = (f["affinity"][g[3:]][dev], topo["matrix"][g][nic])
    return out


@pytest.mark.parametrize(
    "shape,topo_file",
    [
        ("hgx_h100_12nic", "nvidia-smi-topo/8gpu-nv18-12nic-cx7-ib-plus-cx6dx-eth-mooncake2039.txt"),
        ("mixed_roce_ib", "nvidia-smi-topo/1x-a100-pcie-4nic-cx4lx-cx6-messy-alignment-ncclt350.txt"),
        ("pcie_2gpu", "nvidia-smi-topo/dell-r7525-2x-a100-pcie-sys-1nic-cx6-ncclt293.txt"),
    ],
)
def test_sysfs_matrix_reproduces_real_topo(trees, shape, topo_file):
    f = gather_hw_facts(trees[shape])
    pairs = _sysfs_matrix_vs_topo(f, parse_nvidia_smi_topo(realdata(topo_file)))
    assert {k: v for k, v in pairs.items() if v[0] != v[1]} == {}


def test_dgx_a100_switch_structure_and_topo_wins(trees):
    text = realdata("nvidia-smi-topo/8x-a100-nv12-17nic-2-per-pxb-plus-mlx5_bond_0.txt")
    topo = parse_nvidia_smi_topo(text)
    f = gather_hw_facts(trees["dgx_a100"])
    pairs = _sysfs_matrix_vs_topo(f, topo)
    # PCIe-switch structure (PIX/PXB) is identical; beyond the switch the real box reports SYS where
    # a single-NUMA sysfs tree can only say NODE (documented limitation: pass topo_text for exactness)
    near = {"PIX", "PXB"}
    assert {k for k, v in pairs.items() if v[0] in near} == {k for k, v in pairs.items() if v[1] in near}
    assert {v for v in pairs.values() if v[1] not in near} == {("NODE", "SYS")}
    ft = gather_hw_facts(trees["dgx_a100"], topo_text=text)
    assert ft["affinity_source"] == "nvidia-smi topo"
    assert {k: v for k, v in _sysfs_matrix_vs_topo(ft, topo).items() if v[0] != v[1]} == {}
    assert ft["rail_hcas"] == f["rail_hcas"]
    assert ft["nvlink"] == {
        "nvswitch_count": 6,
        "nvswitches": f["nvlink"]["nvswitches"],
        "present": True,
        "source": "nvidia-smi topo",
        "links_per_gpu_pair": 12,
    }


def test_hgx_topo_text_gives_same_rails_and_nvlink(trees):
    text = realdata("nvidia-smi-topo/8gpu-nv18-12nic-cx7-ib-plus-cx6dx-eth-mooncake2039.txt")
    f = gather_hw_facts(trees["hgx_h100_12nic"], topo_text=text)
    assert f["rail_hcas"] == EXPECTED["hgx_h100_12nic"]["rails"]
    assert all(r["link"] == "PIX" for r in f["rails"])
    assert f["nvlink"]["present"] and f["nvlink"]["links_per_gpu_pair"] == 18
    # the Ethernet CX-6 Dx ports next to GPU0/GPU4 (PIX too) are not chosen: IB is the dominant fabric
    assert not {"mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"} & set(f["rail_hcas"])


def test_topo_without_nic_legend_falls_back_to_sysfs(trees):
    text = realdata("nvidia-smi-topo/8x-rtx4090-pcie-all-sys-2nic-go-gpuallocator17.txt")
    f = gather_hw_facts(trees["pcie_4gpu"], topo_text=text)
    assert f["affinity_source"] == "sysfs"
    assert any("no NIC Legend" in w for w in f["warnings"])


def test_topo_gpu_count_mismatch_warns(trees):
    text = realdata("nvidia-smi-topo/4x-a10-pcie-no-nvlink-2nic.txt")
    f = gather_hw_facts(trees["pcie_2gpu"], topo_text=text)
    assert any("4 GPUs but sysfs has 2" in w for w in f["warnings"])
    assert any("mlx5_1" in w for w in f["warnings"])  # topo names an HCA sysfs lacks


def test_truncated_topo_text_raises(trees):
    with pytest.raises(ParseError, match="cut off in row GPU3"):
        gather_hw_facts(
            trees["no_rdma"],
            topo_text=realdata("nvidia-smi-topo/gb200-4gpu-nv18-6nic-numa-affinity-lists-PARTIAL.txt"),
        )


def test_ibdev2netdev_text_overlay(trees):
    text = realdata("ibdev2netdev/dgx-h100-style-8ib-ibpXXs0-3eth-cnode3-011.txt")
    f = gather_hw_facts(trees["dgx_h100"], ibdev2netdev_text=text)
    by = {h["device"]: h["ports"][0] for h in f["hcas"]}
    assert by["mlx5_10"]["netdev"] == "ibp220s0" and by["mlx5_10"]["netdev_link"] == "Up"
    assert by["mlx5_1"]["netdev_link"] == "Down"
    assert [r["netdev"] for r in f["rails"]] == [
        "ibp24s0",
        "ibp64s0",
        "ibp79s0",
        "ibp94s0",
        "ibp154s0",
        "ibp192s0",
        "ibp206s0",
        "ibp220s0",
    ]
    g = gather_hw_facts(trees["roce_node"], ibdev2netdev_text=text)
    assert any("mlx5_10" in w for w in g["warnings"])


def test_dgx_h100_gpu_and_hca_placement(trees):
    f = gather_hw_facts(trees["dgx_h100"])
    assert [g["pci_address"] for g in f["gpus"]][:2] == ["0000:19:00.0", "0000:3b:00.0"]
    assert {g["device_id"] for g in f["gpus"]} == {"0x2330"} and f["gpus"][0]["die"] == "GH100"
    assert [g["numa_node"] for g in f["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    h = {h["device"]: h for h in f["hcas"]}
    assert h["mlx5_0"]["pci_address"] == "0000:18:00.0"
    p = h["mlx5_0"]["ports"][0]
    assert (p["state"], p["phys_state"], p["rate_gbps"], p["link_layer"], p["netdev"]) == (
        "ACTIVE",
        "LinkUp",
        400.0,
        "InfiniBand",
        "ibp24s0",
    )
    assert h["mlx5_1"]["ports"][0]["state"] == "DOWN"
    assert f["affinity"]["0"]["mlx5_3"] == "NODE" and f["affinity"]["0"]["mlx5_6"] == "SYS"
    assert f["numa_nodes"] == {"0": "0-55,112-167", "1": "56-111,168-223"}


def test_fabric_summary(trees):
    text = realdata("nvidia-smi/q-grep-fabric-clique-mnnvl-health-unhealthy.txt")
    f = gather_hw_facts(trees["no_rdma"], nvidia_smi_q_text=text)
    assert f["fabric"] == {
        "state": "Completed",
        "status": "Success",
        "clique_id": 2,
        "cluster_uuid": "dc6e40c4-d722-4357-9ba6-5291dd461278",
        "health_summary": "Unhealthy",
        "gpus_reporting": 1,
    }
    assert gather_hw_facts(trees["no_rdma"])["fabric"] is None


def test_vf_excluded_and_class_net_fallback(tmp_path):
    b = SysfsBuilder(tmp_path)
    b.numa(0, "0-15")
    pf = {"state": "ACTIVE", "rate": 200, "layer": "InfiniBand"}
    vf = {"state": "ACTIVE", "rate": 200, "layer": "InfiniBand", "netdev": "ibp75s0v0"}
    b.build(
        [
            (
                "hb",
                "0000:00",
                0,
                [
                    ("rp", [("gpu", "0000:4a:00.0", 0x20B5)]),
                    ("rp", [("hca", "0000:4b:00.0", "mlx5_2", [pf])]),
                ],
            ),
        ]
    )
    (pf_dir,) = tmp_path.glob("sys/devices/pci0000:00/*/0000:4b:00.0")
    b._node(pf_dir.parent, "0000", 0, ("vf", "0000:4b:00.1", "mlx5_12", "0000:4b:00.0", [vf]))
    # netdev only reachable through /sys/class/net/<nd>/device (no <pci>/net directory)
    nd = tmp_path / "sys/class/net/ibp75s0"
    nd.mkdir(parents=True)
    (nd / "dev_port").write_text("0\n")
    os.symlink(os.path.relpath(tmp_path / "sys/bus/pci/devices/0000:4b:00.0", nd), nd / "device")
    f = gather_hw_facts(str(tmp_path))
    h = {h["device"]: h for h in f["hcas"]}
    assert h["mlx5_12"]["vf"] is True and h["mlx5_2"]["vf"] is False
    assert h["mlx5_2"]["ports"][0]["netdev"] == "ibp75s0"
    assert f["rail_hcas"] == ["mlx5_2"] and f["rails"][0]["link"] == "PHB"
    assert f["default_interface"] is None
    assert f["warnings"] == ["no IPv4 default route: NCCL_SOCKET_IFNAME falls back to excluding lo and docker bridges"]


def test_pci_link_rules():
    def dev(hb, chain, numa):
        return {"host_bridge": hb, "bridges": chain, "numa_node": numa}

    sw = ["rp", "usp"]
    assert pci_link(dev("0:00", [*sw, "d1"], 0), dev("0:00", [*sw, "d2"], 0)) == "PIX"  # one switch
    assert pci_link(dev("0:00", [*sw, "d1"], 0), dev("0:00", [*sw, "d1"], 0)) == "PIX"  # same port/functions
    assert pci_link(dev("0:00", [*sw, "d1", "u2", "d3"], 0), dev("0:00", [*sw, "d2"], 0)) == "PXB"
    assert pci_link(dev("0:00", ["rp1"], 0), dev("0:00", ["rp2"], 0)) == "PHB"
    assert pci_link(dev("0:00", ["rp1"], 0), dev("0:40", ["rp2"], 0)) == "NODE"
    assert pci_link(dev("0:00", ["rp1"], 0), dev("0:80", ["rp2"], 1)) == "SYS"
    assert pci_link(dev("0:00", ["rp1"], None), dev("0:80", ["rp2"], None)) == "SYS"
    assert pci_link(dev("0:00", ["rp1"], None), dev("0:80", ["rp2"], None), single_numa=True) == "NODE"


def test_no_rdma_gpu_pair_is_phb_like_real_topo(trees):
    raw = read_sysfs(trees["no_rdma"])
    a, b = (raw["pci"][g["pci_address"]] for g in raw["gpus"])
    topo = parse_nvidia_smi_topo(realdata("nvidia-smi-topo/2x-rtx5090-pcie-phb-single-numa-club3090-1229.txt"))
    assert pci_link(a, b) == topo["matrix"]["GPU0"]["GPU1"] == "PHB"


@pytest.mark.parametrize(
    "dev_id,arch,die",
    [
        (0x1DB4, "Volta", "GV100"),  # V100-PCIE-16GB (dcgmi fixture)
        (0x1EB8, "Turing", "TU104"),
        (0x20B2, "Ampere", "GA100"),
        (0x2236, "Ampere", "GA102"),
        (0x2330, "Hopper", "GH100"),  # H100 SXM5 (dcgmi fixture)
        (0x26B9, "Ada", "AD102"),
        (0x2901, "Blackwell", "GB100"),
        (0x2B85, "Blackwell", "GB202"),
        (0x1234, "unknown", None),
    ],
)
def test_gpu_architecture(dev_id, arch, die):
    assert gpu_architecture(dev_id) == (arch, die)


def test_empty_root(tmp_path):
    f = gather_hw_facts(str(tmp_path))
    assert (f["gpu_count"], f["hca_count"], f["rail_count"], f["nvlink"]["present"]) == (0, 0, 0, False)


def test_hca_functions_found_by_vendor_id_before_any_driver(tmp_path):
    """A ConnectX with no driver yet (no RDMA device) is an HCA function; an Intel NIC or a GPU is not."""
    b = SysfsBuilder(tmp_path)
    b.build(
        [
            (
                "hb",
                "0000:00",
                0,
                [
                    ("rp", [("dev", "0000:17:00.0", 0x8086, 0x1593, 0x020000)]),  # Intel E810
                    ("rp", [("dev", "0000:3b:00.0", 0x15B3, 0x1021, 0x020000)]),  # ConnectX-7, Ethernet
                    ("rp", [("dev", "0000:5e:00.0", 0x15B3, 0x1023, 0x020700)]),  # ConnectX-8, InfiniBand
                    ("rp", [("dev", "0000:5f:00.0", 0x15B3, 0xA2DC, 0x010802)]),  # BlueField storage function
                    ("rp", [("gpu", "0000:19:00.0", 0x2330)]),
                ],
            )
        ]
    )
    f = gather_device_facts(str(tmp_path))
    assert [(h["pci_address"], h["device_id"], h["link_layer"], h["rdma_device"]) for h in f["hca_functions"]] == [
        ("0000:3b:00.0", "0x1021", "Ethernet", None),
        ("0000:5e:00.0", "0x1023", "InfiniBand", None),
    ]
    assert f["hcas"] == [] and f["hca_count"] == 0
    assert f["gpu_count"] == 1 and f["gpu_architectures"] == ["Hopper"]


def test_hca_function_without_device_file_and_with_its_rdma_device(tmp_path):
    b = SysfsBuilder(tmp_path)
    port = {"state": "DOWN", "layer": "InfiniBand"}
    b.build([("hb", "0000:00", 0, [("rp", [("hca", "0000:4b:00.0", "mlx5_2", [port])])])])
    (pf_dir,) = tmp_path.glob("sys/devices/pci0000:00/*/0000:4b:00.0")
    b._node(pf_dir.parent, "0000", 0, ("vf", "0000:4b:00.1", "mlx5_12", "0000:4b:00.0", [port]))
    (pf_dir / "device").unlink()
    functions = gather_device_facts(str(tmp_path))["hca_functions"]
    assert [(h["pci_address"], h["device_id"], h["vf"], h["rdma_device"]) for h in functions] == [
        ("0000:4b:00.0", None, False, "mlx5_2"),
        ("0000:4b:00.1", "0x101e", True, "mlx5_12"),
    ]


@pytest.mark.parametrize("shape", ["dgx_h100", "hgx_h100_12nic_sm_down", "no_rdma"])
def test_device_facts_are_the_full_facts_devices_without_their_warnings(trees, shape):
    devices = gather_device_facts(trees[shape])
    full = gather_hw_facts(trees[shape])
    assert devices["warnings"] == []
    assert "rails" not in devices and "affinity" not in devices
    for key in ("gpus", "gpu_count", "gpu_architectures", "hca_functions", "hcas", "hca_count", "nvlink"):
        assert devices[key] == full[key], key
    # every registered RDMA device of these shapes is one of the HCA functions
    assert {h["pci_address"] for h in full["hcas"]} <= {h["pci_address"] for h in devices["hca_functions"]}


# The lent H200 VM's sysfs: the GPU on the root bus with no bridge, numa_node -1, one NUMA node.
H200_VM = {
    "numa": {0: "0-15"},
    "default_route": "eth0",
    "tree": [("hb", "0000:00", None, [("gpu", "0000:00:06.0", 0x2335)])],
}


def test_a_gpu_the_driver_lists_that_sysfs_lacks_is_a_warning_not_a_product(tmp_path):
    elsewhere = realdata("nvidia-smi/query-gpu-1x-h200.txt").replace("00000000:00:06.0", "00000000:00:07.0")
    f = gather_hw_facts(str(build(tmp_path, H200_VM)), nvidia_smi_query_text=elsewhere)
    assert f["gpu_products"] == []
    assert f["warnings"] == ["nvidia-smi lists NVIDIA H200 at 00000000:00:07.0, which sysfs does not have"]
    assert gather_hw_facts(str(build(tmp_path / "bare", H200_VM)))["gpu_products"] == []  # no driver, no names


def test_a_lent_h200_vm_reads_as_it_did_there(tmp_path):
    """What railforge_hw_facts gave on a lent H200 VM (benchmarks/gpu_node_capture.sh, 2026-11-28), from a tree
    holding what that VM's sysfs held (H200_VM)."""
    f = gather_hw_facts(
        str(build(tmp_path, H200_VM)),
        topo_text=realdata("nvidia-smi-topo/1x-h200-no-nic-ansi-underlined-header.txt"),
        nvidia_smi_q_text=realdata("nvidia-smi/q-full-1x-h200-fabric-all-na.txt"),
        nvidia_smi_query_text=realdata("nvidia-smi/query-gpu-1x-h200.txt"),
    )
    assert f["gpu_products"] == ["NVIDIA H200"]  # the driver's name for the GPU sysfs knows by its device id
    assert f["gpus"] == [
        {
            "architecture": "Hopper",
            "device_id": "0x2335",
            "die": "GH100",
            "index": 0,
            "numa_node": None,
            "pci_address": "0000:00:06.0",
        }
    ]
    assert (f["affinity"], f["affinity_source"], f["numa_nodes"]) == ({"0": {}}, "nvidia-smi topo", {"0": "0-15"})
    assert f["fabric"] == {
        "clique_id": None,
        "cluster_uuid": None,
        "gpus_reporting": 1,
        "health_summary": None,
        "state": None,
        "status": None,
    }
    assert (f["hca_count"], f["rails"], f["nvlink"]["present"], f["warnings"]) == (0, [], False, [])
