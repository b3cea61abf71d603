"""Simulated sysfs trees (PCI hierarchy, RDMA devices, netdevs, NUMA) for the hardware facts: the unit tests'
machine shapes and the lab's DGX-shaped workers (``railforge lab hardware``) are built with it.

A machine is described compactly as nested tuples::

    ("hb", "0000:00", numa, [children])          host bridge  -> /sys/devices/pci0000:00
    ("rp", [children])                           root port (a PCI bridge)
    ("sw", [[dsp0 children], [dsp1 children]])   PCIe switch: upstream port + one downstream port per list
    ("gpu", "0000:19:00.0", 0x2330)              NVIDIA GPU (class 0x0302)
    ("nvswitch", "0000:05:00.0", 0x1af1)         NVIDIA bridge-class device (NVSwitch)
    ("hca", "0000:18:00.0", "mlx5_0", [port])    Mellanox RDMA function, ports as dicts:
         {"state": "ACTIVE", "rate": 400, "layer": "InfiniBand", "netdev": "ibp24s0", "roce": "v2"}
    ("vf", "0000:18:00.1", "mlx5_12", "0000:18:00.0", [port])   SR-IOV VF of the PF given
    ("dev", "0000:20:00.0", vendor, device, cls)  anything else

Bridges get generated addresses with device numbers 01..1f, endpoints must use device 00, so the two
never collide.  All links are relative, like the kernel's, so the tree can live anywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

_PHYS = {"ACTIVE": "5: LinkUp", "DOWN": "3: Disabled", "INIT": "5: LinkUp", "ARMED": "5: LinkUp"}
_STATE_NUM = {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4}


def fixture_body(text: str) -> str:
    """A tool output of tests/fixtures/realdata (or derived) without its 4 header lines (source, machine, notes,
    the ``# ---`` rule)."""
    lines = text.splitlines(keepends=True)
    if len(lines) < 4 or not lines[3].startswith("# ---"):
        raise ValueError("not a fixture: its fourth line is not the '# ---' rule")
    return "".join(lines[4:])


class SysfsBuilder:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.sys = self.root / "sys"
        self._bridge_counter = 0
        for d in ("bus/pci/devices", "class/infiniband", "class/net", "devices/system/node"):
            (self.sys / d).mkdir(parents=True, exist_ok=True)

    # ---- primitives -------------------------------------------------------------------
    @staticmethod
    def _write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")

    @staticmethod
    def _link(link: Path, target: Path) -> None:
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(target, link.parent), link)

    def _pci(self, parent: Path, bdf: str, vendor: int, device: int, cls: int, numa) -> Path:
        d = parent / bdf
        d.mkdir(parents=True)
        self._write(d / "vendor", f"0x{vendor:04x}")
        self._write(d / "device", f"0x{device:04x}")
        self._write(d / "class", f"0x{cls:06x}")
        self._write(d / "numa_node", str(-1 if numa is None else numa))
        self._link(self.sys / "bus/pci/devices" / bdf, d)
        return d

    def _bridge(self, parent: Path, domain: str, numa) -> Path:
        k = self._bridge_counter
        self._bridge_counter += 1
        bdf = f"{domain}:{0xF0 + k // 31:02x}:{1 + k % 31:02x}.0"
        return self._pci(parent, bdf, 0x10B5, 0xC010, 0x060400, numa)

    # ---- public ------------------------------------------------------------------------
    def numa(self, node: int, cpulist: str) -> None:
        self._write(self.sys / f"devices/system/node/node{node}/cpulist", cpulist)

    def default_route(self, iface: str) -> None:
        self._write(
            self.root / "proc/net/route",
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
            f"{iface}\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0",
        )

    def build(self, tree: list) -> SysfsBuilder:
        for node in tree:
            assert node[0] == "hb", node
            _, hb, numa, children = node
            base = self.sys / "devices" / f"pci{hb}"
            base.mkdir(parents=True, exist_ok=True)
            domain = hb.split(":")[0]
            for ch in children:
                self._node(base, domain, numa, ch)
        return self

    def _node(self, parent: Path, domain: str, numa, node) -> None:
        kind = node[0]
        if kind == "rp":
            d = self._bridge(parent, domain, numa)
            for ch in node[1]:
                self._node(d, domain, numa, ch)
        elif kind == "sw":
            usp = self._bridge(parent, domain, numa)
            for dsp_children in node[1]:
                dsp = self._bridge(usp, domain, numa)
                for ch in dsp_children:
                    self._node(dsp, domain, numa, ch)
        elif kind == "gpu":
            self._pci(parent, node[1], 0x10DE, node[2], 0x030200, numa)
        elif kind == "nvswitch":
            self._pci(parent, node[1], 0x10DE, node[2], 0x068000, numa)
        elif kind == "dev":
            self._pci(parent, node[1], node[2], node[3], node[4], numa)
        elif kind == "hca":
            d = self._pci(parent, node[1], 0x15B3, 0x1021, 0x020700, numa)
            self._ib(d, node[2], node[3])
        elif kind == "vf":
            d = self._pci(parent, node[1], 0x15B3, 0x101E, 0x020700, numa)
            self._link(d / "physfn", parent / node[3])
            self._ib(d, node[2], node[4])
        else:  # pragma: no cover
            raise ValueError(kind)

    def _ib(self, pci_dir: Path, name: str, ports: list[dict]) -> None:
        ib = pci_dir / "infiniband" / name
        for n, p in enumerate(ports, 1):
            pd = ib / "ports" / str(n)
            st = p.get("state", "ACTIVE")
            self._write(pd / "state", f"{_STATE_NUM[st]}: {st}")
            self._write(pd / "phys_state", p.get("phys", _PHYS[st]))
            rate = p.get("rate", 400)
            self._write(pd / "rate", f"{rate} Gb/sec (4X)")
            self._write(pd / "link_layer", p.get("layer", "InfiniBand"))
            if p.get("roce"):
                types = ["IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"] if p["roce"] == "v2" else ["IB/RoCE v1"]
                for i, t in enumerate(types):
                    self._write(pd / "gid_attrs" / "types" / str(i), t)
            if p.get("netdev"):
                nd = pci_dir / "net" / p["netdev"]
                self._write(nd / "dev_port", str(n - 1))
                self._link(nd / "device", pci_dir)
                self._link(self.sys / "class/net" / p["netdev"], nd)
        self._link(ib / "device", pci_dir)
        self._link(self.sys / "class/infiniband" / name, ib)


def build(root: Path, shape: dict) -> Path:
    """Create the tree for ``shape`` (see shapes.py) under ``root``; return root."""
    b = SysfsBuilder(root)
    for node, cpus in shape.get("numa", {}).items():
        b.numa(node, cpus)
    if shape.get("default_route"):
        b.default_route(shape["default_route"])
    b.build(shape["tree"])
    return Path(root)


DGX_H100_PAIRS = [  # (gpu bus, hca bus, hca, numa)
    (0x19, 0x18, "mlx5_0", 0),
    (0x3B, 0x40, "mlx5_3", 0),
    (0x4C, 0x4F, "mlx5_4", 0),
    (0x5D, 0x5E, "mlx5_5", 0),
    (0x9B, 0x9A, "mlx5_6", 1),
    (0xBB, 0xC0, "mlx5_8", 1),
    (0xCB, 0xCE, "mlx5_9", 1),
    (0xDB, 0xDC, "mlx5_10", 1),
]


def dgx_h100(ibdev2netdev: list[dict]) -> dict:
    """The shape of a DGX H100 (8 x H100 SXM5, 8 ConnectX-7 InfiniBand compute ports each on its GPU's PCIe
    switch, 3 Ethernet ports, 4 NVSwitches, 2 NUMA nodes) with the RDMA device and netdev names and link states of
    ``ibdev2netdev`` (the parsed lines of a real one: railforge_hwparse.parse_ibdev2netdev). The GPU<->HCA pairing
    by bus number, the NVSwitch functions and the CPU lists are the shape's assumptions (2 x 56 cores with HT)."""
    links = {e["device"]: e for e in ibdev2netdev}

    def port(dev, layer, rate):
        e = links[dev]
        return {
            "state": "ACTIVE" if e["link"] == "Up" else "DOWN",
            "rate": rate,
            "layer": layer,
            "netdev": e["netdev"],
        }

    tree: list[tuple] = []
    for gbus, hbus, hca, numa in DGX_H100_PAIRS:
        tree.append(
            (
                "hb",
                f"0000:{gbus - 3:02x}",
                numa,
                [
                    (
                        "rp",
                        [
                            (
                                "sw",
                                [
                                    [("gpu", f"0000:{gbus:02x}:00.0", 0x2330)],
                                    [("hca", f"0000:{hbus:02x}:00.0", hca, [port(hca, "InfiniBand", 400)])],
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
            "0000:28",
            0,
            [
                (
                    "rp",
                    [
                        ("hca", "0000:29:00.0", "mlx5_1", [port("mlx5_1", "Ethernet", 200)]),
                        ("hca", "0000:29:00.1", "mlx5_2", [port("mlx5_2", "Ethernet", 200)]),
                    ],
                )
            ],
        )
    )
    tree.append(("hb", "0000:a9", 1, [("rp", [("hca", "0000:aa:00.0", "mlx5_7", [port("mlx5_7", "Ethernet", 200)])])]))
    tree.append(("hb", "0000:04", 0, [("rp", [("nvswitch", f"0000:{5 + k:02x}:00.0", 0x22A3)]) for k in range(4)]))
    return {"numa": {0: "0-55,112-167", 1: "56-111,168-223"}, "default_route": "enp170s0np0", "tree": tree}
