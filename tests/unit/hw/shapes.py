"""Machine shapes for the sysfs builder, each built from facts in tests/fixtures/realdata.

Where a fixture does not say something (exact bridge layout, bus numbers not shown), the shape picks
a plausible value and says so in its comment.  Port states/rates/link layers come from the real
ibstat / ibdev2netdev pastes where one exists for the machine.
"""

from __future__ import annotations

from pathlib import Path

from railforge_hwparse import parse_ibdev2netdev, parse_ibstat

from railforge import hwsim

REALDATA = Path(__file__).resolve().parents[2] / "fixtures" / "realdata"
DERIVED = REALDATA.parent / "derived"
IBSTAT_STATES = {"Active": "ACTIVE", "Initializing": "INIT", "Armed": "ARMED"}


def realdata(rel: str, root: Path = REALDATA) -> str:
    """Body of a realdata (or derived) fixture (the 4 header lines stripped)."""
    return hwsim.fixture_body((root / rel).read_text())


def _ports_from_ibstat(rel: str, root: Path = REALDATA) -> dict[str, list[dict]]:
    out = {}
    for ca in parse_ibstat(realdata(rel, root)):
        out[ca["ca"]] = [
            {
                "state": IBSTAT_STATES.get(p["state"], "DOWN"),
                "rate": p["rate"],
                "layer": p["link_layer"],
            }
            for p in ca["ports"]
        ]
    return out


# --------------------------------------------------------------------------------------------------
# 1. DGX-A100 class: 8 x A100-SXM4 (NV12 via 6 NVSwitches), 16 IB ports as 8 dual-port cards, two GPUs
#    and two cards behind a two-level PCIe switch tree per host bridge (GPU<->NIC = PXB, the two ports of
#    one card = PIX, cards of one GPU pair = PXB) + mlx5_bond_0.  Source: nvidia-smi-topo/8x-a100-nv12-
#    17nic-2-per-pxb-plus-mlx5_bond_0.txt (NIC names mlx5_2..mlx5_17, single NUMA node, CPUs 0-103).
#    GPU bus numbers and the 0x20b2 (A100-SXM4-80GB) id are illustrative; the fixture names no model id.
# --------------------------------------------------------------------------------------------------
def _dgx_a100():
    tree = []
    gpu_bus = [0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD]
    nic = 2
    for pair in range(4):
        ga, gb = gpu_bus[2 * pair], gpu_bus[2 * pair + 1]
        cards = []
        for _card in range(2):
            bus = 0x0C + 0x40 * pair + 8 * _card
            port = {"state": "ACTIVE", "rate": 200, "layer": "InfiniBand"}
            cards.append(
                (
                    "sw",
                    [
                        [
                            ("hca", f"0000:{bus:02x}:00.0", f"mlx5_{nic}", [port]),
                            ("hca", f"0000:{bus:02x}:00.1", f"mlx5_{nic + 1}", [port]),
                        ]
                    ],
                )
            )
            nic += 2
        tree.append(
            (
                "hb",
                f"0000:{0x00 + 0x40 * pair:02x}",
                0,
                [
                    (
                        "rp",
                        [
                            (
                                "sw",
                                [
                                    [
                                        (
                                            "sw",
                                            [
                                                [("gpu", f"0000:{ga:02x}:00.0", 0x20B2)],
                                                [("gpu", f"0000:{gb:02x}:00.0", 0x20B2)],
                                            ],
                                        )
                                    ],
                                    [cards[0]],
                                    [cards[1]],
                                ],
                            )
                        ],
                    )
                ],
            )
        )
    tree.append(
        (
            "hb",
            "0000:e8",
            0,
            [
                (
                    "rp",
                    [
                        (
                            "hca",
                            "0000:e9:00.0",
                            "mlx5_bond_0",
                            [{"state": "ACTIVE", "rate": 100, "layer": "Ethernet", "netdev": "bond0"}],
                        )
                    ],
                )
            ],
        )
    )
    tree.append(("hb", "0000:e0", 0, [("rp", [("nvswitch", f"0000:e{k + 1}:00.0", 0x1AF1)]) for k in range(6)]))
    return {"numa": {0: "0-103"}, "default_route": "bond0", "tree": tree}


# --------------------------------------------------------------------------------------------------
# 2. DGX H100 shape: 8 x H100 SXM5 (0x2330) + 8 ConnectX-7 IB compute ports, each GPU sharing a PCIe
#    switch with its own HCA, + storage/management Ethernet ports.  RDMA device names, netdev names and
#    Up/Down from ibdev2netdev/dgx-h100-style-8ib-ibpXXs0-3eth-cnode3-011.txt (netdev ibpNNs0 encodes the
#    HCA bus: 24=0x18 ... 220=0xdc, matching the 8 CX-7 buses in mlxconfig/dgx-h100-basepod-...txt);
#    GPU buses from nvidia-smi/default-table-8x-h100-80gb-hbm3-560.35.03-persistence-off.txt.  The pairing
#    GPU<->nearest HCA by bus number, the 4 NVSwitch bridge functions and the CPU lists are the shape's
#    assumptions (2 sockets x 56 cores with HT).
# --------------------------------------------------------------------------------------------------
def _dgx_h100():
    return hwsim.dgx_h100(parse_ibdev2netdev(realdata("ibdev2netdev/dgx-h100-style-8ib-ibpXXs0-3eth-cnode3-011.txt")))


# --------------------------------------------------------------------------------------------------
# 3. HGX 8-GPU NV18 node with 12 RDMA devices: 8 ConnectX-7 IB 400 + 2 dual-port ConnectX-6 Dx Ethernet.
#    Layout reproduces nvidia-smi-topo/8gpu-nv18-12nic-cx7-ib-plus-cx6dx-eth-mooncake2039.txt exactly
#    (GPU0/GPU4 share a switch with 3 NICs, the rest 1:1, NODE within a socket, SYS across); port
#    states/rates/link layers from ibstat/12hca-8xcx7-ndr400-ib-plus-cx6dx-eth-mooncake2039.txt (same
#    node).  GPU model not stated in the fixture: 0x2330 and the bus numbers are illustrative.
# --------------------------------------------------------------------------------------------------
def _hgx_12nic(ibstat: str = "ibstat/12hca-8xcx7-ndr400-ib-plus-cx6dx-eth-mooncake2039.txt", root: Path = REALDATA):
    ports = _ports_from_ibstat(ibstat, root)
    groups = [  # (numa, gpu index, [[rdma functions behind one switch downstream port], ...])
        (0, 0, [["mlx5_0"], ["mlx5_1", "mlx5_2"]]),
        (0, 1, [["mlx5_3"]]),
        (0, 2, [["mlx5_4"]]),
        (0, 3, [["mlx5_5"]]),
        (1, 4, [["mlx5_6"], ["mlx5_7", "mlx5_8"]]),
        (1, 5, [["mlx5_9"]]),
        (1, 6, [["mlx5_10"]]),
        (1, 7, [["mlx5_11"]]),
    ]
    tree = []
    for numa, g, nics in groups:
        hb = 0x10 + 0x10 * g + (0x40 if numa else 0)
        dsps = [[("gpu", f"0000:{hb + 1:02x}:00.0", 0x2330)]]
        for k, funcs in enumerate(nics):
            dsps.append([("hca", f"0000:{hb + 2 + k:02x}:00.{f}", name, ports[name]) for f, name in enumerate(funcs)])
        tree.append(("hb", f"0000:{hb:02x}", numa, [("rp", [("sw", dsps)])]))
    return {"numa": {0: "0-47", 1: "48-95"}, "default_route": "eth0", "tree": tree}


# 3b. The same node before its subnet manager is up: every InfiniBand port INIT, or those of one socket
#     (tests/fixtures/derived/ibstat, derived from the node's real ibstat). The two active 100G Ethernet
#     ports must not become rails.
def _hgx_12nic_sm_down():
    return _hgx_12nic("ibstat/12hca-8xcx7-ib-plus-cx6dx-eth-mooncake2039-sm-down-all-ib-initializing.txt", DERIVED)


def _hgx_12nic_sm_partial():
    return _hgx_12nic("ibstat/12hca-8xcx7-ib-plus-cx6dx-eth-mooncake2039-sm-partial-4-ib-initializing.txt", DERIVED)


# --------------------------------------------------------------------------------------------------
# 4. PCIe 2-GPU server (Dell R7525 in nvidia-smi-topo/dell-r7525-2x-a100-pcie-sys-1nic-cx6-ncclt293.txt):
#    2 x A100-PCIE-40GB (0x20f1) on NUMA 1 (CPUs 24-47,72-95), one ConnectX-6 HDR IB on the other socket,
#    so GPU<->NIC is SYS for both and the single HCA is shared by the two GPUs.
# --------------------------------------------------------------------------------------------------
def _pcie_2gpu():
    ib = [{"state": "ACTIVE", "rate": 200, "layer": "InfiniBand", "netdev": "ibp33s0"}]
    return {
        "numa": {0: "0-23,48-71", 1: "24-47,72-95"},
        "default_route": "eno1",
        "tree": [
            ("hb", "0000:20", 0, [("rp", [("hca", "0000:21:00.0", "mlx5_0", ib)])]),
            ("hb", "0000:80", 1, [("rp", [("gpu", "0000:81:00.0", 0x20F1)])]),
            ("hb", "0000:c0", 1, [("rp", [("gpu", "0000:c1:00.0", 0x20F1)])]),
        ],
    }


# --------------------------------------------------------------------------------------------------
# 5. PCIe 4-GPU server (nvidia-smi-topo/4x-a10-pcie-no-nvlink-2nic.txt): 4 x A10 (GA102, 0x2236), one
#    dual-port NIC (mlx5_0/mlx5_1, PIX to each other), single NUMA node, CPUs 0-127.  Both ports active
#    IB 100 here (the fixture does not say), so 4 GPUs share 2 HCAs.
# --------------------------------------------------------------------------------------------------
def _pcie_4gpu():
    p0 = [{"state": "ACTIVE", "rate": 100, "layer": "InfiniBand", "netdev": "ibp65s0f0"}]
    p1 = [{"state": "ACTIVE", "rate": 100, "layer": "InfiniBand", "netdev": "ibp65s0f1"}]
    tree = [
        ("hb", f"0000:{b - 1:02x}", 0, [("rp", [("gpu", f"0000:{b:02x}:00.0", 0x2236)])])
        for b in (0x01, 0x21, 0x81, 0xC1)
    ]
    tree.append(
        (
            "hb",
            "0000:40",
            0,
            [("rp", [("hca", "0000:41:00.0", "mlx5_0", p0), ("hca", "0000:41:00.1", "mlx5_1", p1)])],
        )
    )
    return {"numa": {0: "0-127"}, "default_route": "eno1", "tree": tree}


# --------------------------------------------------------------------------------------------------
# 6. RoCE node (NVIDIA EGX stack reference node: ibdev2netdev/egx-stack-dual-port-100gbe-ens192f0-up-f1-
#    down.txt + nvidia-smi/default-table-1x-a100-pcie-40gb-460.32.03-old-layout-in-k8s-pod.txt): one
#    A100-PCIE-40GB at 3b:00.0, dual-port 100GbE RoCE (mlx5_0 ens192f0 Up, mlx5_1 ens192f1 Down) on the
#    same host bridge (PHB).  RoCE v2 GID types and the eno1 default route are the shape's assumptions.
# --------------------------------------------------------------------------------------------------
def _roce_node():
    links = {
        e["device"]: e
        for e in parse_ibdev2netdev(realdata("ibdev2netdev/egx-stack-dual-port-100gbe-ens192f0-up-f1-down.txt"))
    }
    ports = {
        d: [
            {
                "state": "ACTIVE" if e["link"] == "Up" else "DOWN",
                "rate": 100,
                "layer": "Ethernet",
                "netdev": e["netdev"],
                "roce": "v2",
            }
        ]
        for d, e in links.items()
    }
    return {
        "numa": {0: "0-39"},
        "default_route": "eno1",
        "tree": [
            (
                "hb",
                "0000:3a",
                0,
                [
                    ("rp", [("gpu", "0000:3b:00.0", 0x20F1)]),
                    (
                        "rp",
                        [
                            ("hca", "0000:5e:00.0", "mlx5_0", ports["mlx5_0"]),
                            ("hca", "0000:5e:00.1", "mlx5_1", ports["mlx5_1"]),
                        ],
                    ),
                ],
            ),
        ],
    }


# --------------------------------------------------------------------------------------------------
# 7. Mixed RoCE + IB node (nvidia-smi-topo/1x-a100-pcie-4nic-cx4lx-cx6-messy-alignment-ncclt350.txt and
#    ibstat/cx4lx-roce25-plus-cx6-hdr-ib-a100-pcie-node-ncclt350.txt, same node): 1 x A100 PCIe on NUMA 1,
#    ConnectX-4 Lx 25GbE (mlx5_0/1) on NUMA 0, ConnectX-6 HDR IB (mlx5_2/3) on NUMA 1 behind another host
#    bridge (NODE).  Reproduces the fixture's matrix exactly.
# --------------------------------------------------------------------------------------------------
def _mixed_roce_ib():
    ports = _ports_from_ibstat("ibstat/cx4lx-roce25-plus-cx6-hdr-ib-a100-pcie-node-ncclt350.txt")
    return {
        "numa": {0: "0-63,128-191", 1: "64-127,192-255"},
        "default_route": "eno1",
        "tree": [
            (
                "hb",
                "0000:10",
                0,
                [
                    (
                        "rp",
                        [
                            ("hca", "0000:11:00.0", "mlx5_0", ports["mlx5_0"]),
                            ("hca", "0000:11:00.1", "mlx5_1", ports["mlx5_1"]),
                        ],
                    )
                ],
            ),
            ("hb", "0000:a0", 1, [("rp", [("gpu", "0000:a1:00.0", 0x20F1)])]),
            (
                "hb",
                "0000:c0",
                1,
                [
                    (
                        "rp",
                        [
                            ("hca", "0000:c1:00.0", "mlx5_2", ports["mlx5_2"]),
                            ("hca", "0000:c1:00.1", "mlx5_3", ports["mlx5_3"]),
                        ],
                    )
                ],
            ),
        ],
    }


# --------------------------------------------------------------------------------------------------
# 8. No RDMA: 2 x GeForce RTX 5090 workstation (nvidia-smi-topo/2x-rtx5090-pcie-phb-single-numa-club3090-
#    1229.txt): GPUs on two root ports of one host bridge (PHB), single NUMA node, no /sys/class/infiniband.
#    0x2b85 (GB202) is the shape's device id.
# --------------------------------------------------------------------------------------------------
def _no_rdma():
    return {
        "numa": {0: "0-63"},
        "default_route": "enp5s0",
        "tree": [
            (
                "hb",
                "0000:00",
                0,
                [("rp", [("gpu", "0000:01:00.0", 0x2B85)]), ("rp", [("gpu", "0000:02:00.0", 0x2B85)])],
            )
        ],
    }


SHAPES = {
    "dgx_a100": _dgx_a100,
    "dgx_h100": _dgx_h100,
    "hgx_h100_12nic": _hgx_12nic,
    "hgx_h100_12nic_sm_down": _hgx_12nic_sm_down,
    "hgx_h100_12nic_sm_partial": _hgx_12nic_sm_partial,
    "pcie_2gpu": _pcie_2gpu,
    "pcie_4gpu": _pcie_4gpu,
    "roce_node": _roce_node,
    "mixed_roce_ib": _mixed_roce_ib,
    "no_rdma": _no_rdma,
}
