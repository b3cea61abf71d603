# Railforge - hardware facts from sysfs (GPUs, RDMA HCAs, PCIe affinity, rails).
#
# Read-only: only os.listdir / os.readlink / open(..., "r") below ``root``.  Shipped to managed
# nodes as Ansible module_utils; imported by plugins/modules/railforge_hw_facts.py and by tests.
"""Gather GPU / HCA / PCIe-topology facts from a sysfs tree and compute GPU<->HCA rails."""

from __future__ import annotations

import os
import re

try:  # inside Ansible (module_utils on the managed node)
    from ansible.module_utils.railforge_hwparse import (
        ParseError,
        parse_ibdev2netdev,
        parse_nvidia_smi_q_fabric,
        parse_nvidia_smi_query_csv,
        parse_nvidia_smi_topo,
    )
except ImportError:  # pragma: no cover - plain import path (e.g. a checkout on sys.path)
    from railforge_hwparse import (  # type: ignore
        ParseError,
        parse_ibdev2netdev,
        parse_nvidia_smi_q_fabric,
        parse_nvidia_smi_query_csv,
        parse_nvidia_smi_topo,
    )

__all__ = [
    "LINK_RANK",
    "NVIDIA_ARCH_RANGES",
    "ParseError",
    "gather_device_facts",
    "gather_hw_facts",
    "gpu_architecture",
    "pci_link",
    "read_sysfs",
    "select_rails",
    "summarize_fabric",
]

NVIDIA_VENDOR = 0x10DE
MELLANOX_VENDOR = 0x15B3
# PCI classes (class code >> 8) of an HCA's functions: Ethernet (RoCE) and InfiniBand controllers.
HCA_CLASSES = {0x0200: "Ethernet", 0x0207: "InfiniBand"}

# NVIDIA PCI device-id blocks per GPU die -> architecture.
# Facts taken from NVIDIA's gpu-admin-tools, gpu/devid_chips.py (MIT): each die owns a 0x40/0x80-wide
# block of device ids.  The Blackwell rows were read from github.com/NVIDIA/gpu-admin-tools; the older
# rows from a fuller revision of the same NVIDIA file (same header) whose repository the code index did
# not name.  Spot checks against ids seen in this
# project's real fixtures: 0x2330 = H100 SXM5 (dcgmi diag fixture, "device id 2330"), 0x1db4 =
# V100-PCIE-16GB (dcgmi fixture), 0x26b9 = L40S (gpu-admin-tools devid_names.py).  Only the data-center
# relevant generations are listed; anything else reports "unknown".
NVIDIA_ARCH_RANGES = (
    (0x1D80, 0x1DFF, "Volta", "GV100"),
    (0x1E00, 0x1E7F, "Turing", "TU102"),
    (0x1E80, 0x1EFF, "Turing", "TU104"),
    (0x1F00, 0x1F7F, "Turing", "TU106"),
    (0x1F80, 0x1FFF, "Turing", "TU117"),
    (0x2180, 0x21FF, "Turing", "TU116"),
    (0x2080, 0x20FF, "Ampere", "GA100"),
    (0x2200, 0x227F, "Ampere", "GA102"),
    (0x2400, 0x247F, "Ampere", "GA103"),
    (0x2480, 0x24FF, "Ampere", "GA104"),
    (0x2500, 0x257F, "Ampere", "GA106"),
    (0x2580, 0x25FF, "Ampere", "GA107"),
    (0x2300, 0x237F, "Hopper", "GH100"),
    (0x2680, 0x26FF, "Ada", "AD102"),
    (0x2700, 0x277F, "Ada", "AD103"),
    (0x2780, 0x27FF, "Ada", "AD104"),
    (0x2800, 0x287F, "Ada", "AD106"),
    (0x2880, 0x28FF, "Ada", "AD107"),
    (0x2900, 0x297F, "Blackwell", "GB100"),
    (0x2980, 0x29FF, "Blackwell", "GB102"),
    (0x2B80, 0x2BFF, "Blackwell", "GB202"),
    (0x2C00, 0x2C7F, "Blackwell", "GB203"),
    (0x2D00, 0x2D7F, "Blackwell", "GB206"),
    (0x2D80, 0x2DFF, "Blackwell", "GB207"),
    (0x2F00, 0x2F7F, "Blackwell", "GB205"),
    (0x3180, 0x31FF, "Blackwell", "GB110"),
    (0x3200, 0x327F, "Blackwell", "GB112"),
)

# Lower is closer (nvidia-smi topo legend order).  NV# is GPU<->GPU only.
LINK_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4, "SOC": 4}

_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_HOST_BRIDGE = re.compile(r"^pci([0-9a-f]{4}:[0-9a-f]{2})$")


def gpu_architecture(device_id: int) -> tuple[str, str | None]:
    """NVIDIA PCI device id -> (architecture, die) e.g. 0x2330 -> ("Hopper", "GH100")."""
    for lo, hi, arch, die in NVIDIA_ARCH_RANGES:
        if lo <= device_id <= hi:
            return arch, die
    return "unknown", None


# --------------------------------------------------------------------------------------
# small read-only sysfs helpers
# --------------------------------------------------------------------------------------


def _p(root: str, *parts: str) -> str:
    return os.path.join(root, *[p.lstrip("/") for p in parts])


def _read(path: str):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def _read_int(path: str, base: int = 10):
    v = _read(path)
    if v is None:
        return None
    try:
        return int(v, 0) if base == 0 else int(v, base)
    except ValueError:
        return None


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _resolve(root: str, path: str) -> str:
    """realpath that keeps absolute symlink targets inside ``root``."""
    root_abs = os.path.abspath(root)
    cur = os.path.abspath(path)
    for _ in range(40):
        try:
            target = os.readlink(cur)
        except OSError:
            break
        if os.path.isabs(target):
            cur = os.path.normpath(_p(root_abs, target))
        else:  # relative to the link's real parent directory (which may itself be reached via a link)
            cur = os.path.normpath(os.path.join(os.path.realpath(os.path.dirname(cur)), target))
    # resolve intermediate components too
    return os.path.realpath(cur)


def _pci_chain(root: str, bdf: str) -> tuple[str | None, list[str]]:
    """(host bridge 'DDDD:BB' or None, [bridge BDFs from the root port down to the parent])."""
    real = _resolve(root, _p(root, "sys/bus/pci/devices", bdf))
    parts = real.split(os.sep)
    host = None
    chain: list[str] = []
    for part in parts:
        hm = _HOST_BRIDGE.match(part)
        if hm:
            host = hm.group(1)
            chain = []
        elif _BDF.match(part) and host is not None:
            chain.append(part)
    if chain and chain[-1] == bdf:
        chain = chain[:-1]
    return host, chain


def _read_numa_nodes(root: str) -> dict[int, str]:
    nodes = {}
    base = _p(root, "sys/devices/system/node")
    for name in _listdir(base):
        m = re.match(r"^node(\d+)$", name)
        if m:
            nodes[int(m.group(1))] = _read(os.path.join(base, name, "cpulist")) or ""
    return nodes


def _default_route_iface(root: str):
    text = _read(_p(root, "proc/net/route"))
    if not text:
        return None
    for ln in text.splitlines()[1:]:
        f = ln.split()
        if len(f) >= 8 and f[1] == "00000000" and f[7] == "00000000":
            return f[0]
    return None


# --------------------------------------------------------------------------------------
# sysfs scan
# --------------------------------------------------------------------------------------


def read_sysfs(root: str = "/") -> dict:
    """Scan PCI devices and RDMA devices under ``root``.  Returns raw facts (no rails)."""
    pci: dict[str, dict] = {}
    base = _p(root, "sys/bus/pci/devices")
    for bdf in _listdir(base):
        if not _BDF.match(bdf):
            continue
        d = os.path.join(base, bdf)
        numa = _read_int(os.path.join(d, "numa_node"))
        host, chain = _pci_chain(root, bdf)
        pci[bdf] = {
            "vendor": _read_int(os.path.join(d, "vendor"), 0),
            "device": _read_int(os.path.join(d, "device"), 0),
            "class": _read_int(os.path.join(d, "class"), 0),
            "numa_node": numa if numa is not None and numa >= 0 else None,
            "host_bridge": host,
            "bridges": chain,
            "is_vf": os.path.lexists(os.path.join(d, "physfn")),
        }
    gpus = []
    nvswitches = []
    for bdf, d in sorted(pci.items()):
        if d["vendor"] != NVIDIA_VENDOR or d["class"] is None:
            continue
        cls = d["class"] >> 8
        if cls in (0x0300, 0x0302):
            arch, die = gpu_architecture(d["device"] or 0)
            gpus.append(
                {
                    "pci_address": bdf,
                    "device_id": f"0x{d['device']:04x}",
                    "architecture": arch,
                    "die": die,
                    "numa_node": d["numa_node"],
                }
            )
        elif cls == 0x0680:  # "Bridge: other" - how NVSwitch chips enumerate on HGX boards
            nvswitches.append({"pci_address": bdf, "device_id": f"0x{d['device']:04x}"})
    for i, g in enumerate(gpus):  # nvidia-smi numbers GPUs in PCI bus order
        g["index"] = i
    hcas = []
    ib_base = _p(root, "sys/class/infiniband")
    for dev in sorted(_listdir(ib_base), key=_natural):
        ddir = os.path.join(ib_base, dev)
        dev_link = os.path.join(ddir, "device")
        bdf = os.path.basename(_resolve(root, dev_link)) if os.path.lexists(dev_link) else None
        if bdf is not None and not _BDF.match(bdf):
            bdf = None
        pinfo = pci.get(bdf, {}) if bdf else {}
        netdevs = _netdevs_for(root, ddir, bdf)
        ports = []
        for pn in sorted(_listdir(os.path.join(ddir, "ports")), key=_natural):
            pdir = os.path.join(ddir, "ports", pn)
            if not pn.isdigit():
                continue
            state = _read(os.path.join(pdir, "state")) or ""
            phys = _read(os.path.join(pdir, "phys_state")) or ""
            rate = _read(os.path.join(pdir, "rate")) or ""
            rm = re.match(r"^(\d+(?:\.\d+)?)\s*Gb/sec", rate)
            gid_types = set()
            types_dir = os.path.join(pdir, "gid_attrs", "types")
            for t in _listdir(types_dir):
                v = _read(os.path.join(types_dir, t))
                if v:
                    gid_types.add(v)
            port = int(pn)
            ports.append(
                {
                    "port": port,
                    "state": re.sub(r"^\d+:\s*", "", state) or None,
                    "phys_state": re.sub(r"^\d+:\s*", "", phys) or None,
                    "rate": rate or None,
                    "rate_gbps": float(rm.group(1)) if rm else None,
                    "link_layer": _read(os.path.join(pdir, "link_layer")),
                    "roce_versions": sorted(gid_types),
                    "netdev": netdevs.get(port),
                }
            )
        hcas.append(
            {
                "device": dev,
                "pci_address": bdf,
                "numa_node": pinfo.get("numa_node"),
                "vf": bool(pinfo.get("is_vf")),
                "ports": ports,
                "link_layers": sorted({p["link_layer"] for p in ports if p["link_layer"]}),
            }
        )
    rdma_by_function = {h["pci_address"]: h["device"] for h in hcas if h["pci_address"]}
    hca_functions = [
        {
            "pci_address": bdf,
            "device_id": None if d["device"] is None else f"0x{d['device']:04x}",
            "link_layer": HCA_CLASSES[d["class"] >> 8],
            "vf": d["is_vf"],
            "numa_node": d["numa_node"],
            "rdma_device": rdma_by_function.get(bdf),
        }
        for bdf, d in sorted(pci.items())
        if d["vendor"] == MELLANOX_VENDOR and d["class"] is not None and d["class"] >> 8 in HCA_CLASSES
    ]
    return {
        "pci": pci,
        "gpus": gpus,
        "nvswitches": nvswitches,
        "hca_functions": hca_functions,
        "hcas": hcas,
        "numa_nodes": _read_numa_nodes(root),
        "default_interface": _default_route_iface(root),
    }


def _natural(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _netdevs_for(root: str, ibdir: str, bdf) -> dict[int, str]:
    """port number -> netdev, from <ibdev>/device/net/* (dev_port is 0-based) or /sys/class/net links."""
    out: dict[int, str] = {}
    net_dir = os.path.join(ibdir, "device", "net")
    names = _listdir(net_dir)
    if not names and bdf:
        cls_net = _p(root, "sys/class/net")
        for nd in _listdir(cls_net):
            link = os.path.join(cls_net, nd, "device")
            if os.path.lexists(link) and os.path.basename(_resolve(root, link)) == bdf:
                names.append(nd)
        net_dir = cls_net
    for nd in names:
        dev_port = _read_int(os.path.join(net_dir, nd, "dev_port"))
        port = (dev_port or 0) + 1
        out.setdefault(port, nd)
    return out


# --------------------------------------------------------------------------------------
# affinity
# --------------------------------------------------------------------------------------


def pci_link(a: dict, b: dict, single_numa: bool = False) -> str:
    """nvidia-smi-topo-style link between two PCI devices from their sysfs placement.

    ``a``/``b`` have ``host_bridge``, ``bridges`` (root port first) and ``numa_node``.
    Same host bridge: paths that meet with at most one bridge below the meeting point on each
    side (siblings under one PCIe switch, or functions of one device) = PIX; paths that meet
    deeper (several bridges between the devices) = PXB; different root ports = PHB.
    Different host bridges: same NUMA node = NODE, else SYS.
    """
    if a.get("host_bridge") and a.get("host_bridge") == b.get("host_bridge"):
        ca, cb = a.get("bridges") or [], b.get("bridges") or []
        k = 0
        while k < min(len(ca), len(cb)) and ca[k] == cb[k]:
            k += 1
        if k == 0:
            return "PHB"
        below = (len(ca) - k) + (len(cb) - k)
        return "PIX" if (len(ca) - k) <= 1 and (len(cb) - k) <= 1 and below <= 2 else "PXB"
    na, nb = a.get("numa_node"), b.get("numa_node")
    if na is not None and na == nb:
        return "NODE"
    if na is None and nb is None and single_numa:
        return "NODE"
    return "SYS"


def _topo_affinity(topo: dict, gpus: list[dict], hca_names: list[str], warnings: list[str]):
    """GPU index -> {hca: link} from parsed topo; None when it cannot be mapped."""
    if topo["nics"] and not topo["nic_devices"]:
        warnings.append("topo text has no NIC Legend: NICn cannot be mapped to HCAs; using sysfs PCI tree")
        return None
    if gpus and len(topo["gpus"]) != len(gpus):
        warnings.append(f"topo text lists {len(topo['gpus'])} GPUs but sysfs has {len(gpus)}; GPUs matched by index")
    out: dict[int, dict[str, str]] = {}
    for g in topo["gpus"]:
        idx = int(g[3:])
        row = topo["matrix"][g]
        out[idx] = {}
        for nic in topo["nics"]:
            dev = topo["nic_devices"].get(nic, nic)
            out[idx][dev] = row[nic]
    unknown = sorted({d for r in out.values() for d in r} - set(hca_names))
    if hca_names and unknown:
        warnings.append(f"topo text names HCAs not found in sysfs: {', '.join(unknown)}")
    return out


# --------------------------------------------------------------------------------------
# rails
# --------------------------------------------------------------------------------------


def _best_port(h: dict):
    ports = h.get("ports") or [{"port": 1, "state": None, "link_layer": None, "rate_gbps": None}]
    act = [p for p in ports if _is_active(p)]
    return (act or ports)[0]


def _is_active(port: dict) -> bool:
    return (port.get("state") or "").upper() == "ACTIVE"


def _layer(h: dict) -> str:
    return _best_port(h).get("link_layer") or "unknown"


def _rail_layer(pfs: list[dict], warnings: list[str]) -> str | None:
    """The link layer rails use: the one most physical functions have, active or not (so an InfiniBand fabric
    whose subnet manager is not up yet is still the fabric). A tie goes to InfiniBand, with a warning."""
    layers: dict[str, int] = {}
    for h in pfs:
        layers[_layer(h)] = layers.get(_layer(h), 0) + 1
    if not layers:
        return None
    most = max(layers.values())
    tied = sorted(layer for layer, count in layers.items() if count == most)
    if len(tied) == 1:
        return tied[0]
    chosen = "InfiniBand" if "InfiniBand" in tied else tied[0]
    warnings.append(
        f"as many {' as '.join(tied)} HCAs ({most} each): rails use {chosen}; "
        "set mix_link_layers to let proximity choose across link layers"
    )
    return chosen


def select_rails(
    gpus: list[dict], hcas: list[dict], affinity: dict, warnings: list[str], mix_link_layers: bool = False
) -> dict:
    """Pick each GPU's closest HCA.

    Candidates: physical-function HCAs with an ACTIVE port (never VFs, never a port that is DOWN, INIT or
    ARMED), of one link layer: the one most physical functions have (``_rail_layer``), so RoCE and
    InfiniBand HCAs never share an NCCL_IB_HCA list unless ``mix_link_layers``. Order: link
    (PIX < PXB < PHB < NODE < SYS), then the HCA serving the fewest GPUs so far, then higher rate, then
    natural name order. An HCA that ends up serving several GPUs is reported in ``shared_hcas``.
    Ports of the rails' link layer that are not ACTIVE are named in ``warnings``.
    """
    pfs = [h for h in hcas if not h.get("vf")]
    layer = None if mix_link_layers else _rail_layer(pfs, warnings)
    fabric = [h for h in pfs if layer is None or _layer(h) == layer]
    idle = [h for h in fabric if not _is_active(_best_port(h))]
    cands = [h for h in fabric if _is_active(_best_port(h))]
    if idle:
        names = ", ".join(f"{h['device']} ({_best_port(h).get('state') or 'no state'})" for h in idle)
        warnings.append(
            f"{layer + ' ' if layer else ''}HCA ports not ACTIVE are no rails: {names}"
            + ("" if cands else "; no rails at all (is the subnet manager up? are the links cabled?)")
        )
    taken: dict[str, list[int]] = {}
    rails = []
    for g in gpus:
        idx = g["index"]
        links = affinity.get(idx, {})

        def key(h, links=links):
            p = _best_port(h)
            return (
                LINK_RANK.get(links.get(h["device"], "SYS"), 5),
                len(taken.get(h["device"], [])),
                -(p.get("rate_gbps") or 0),
                _natural(h["device"]),
            )

        if not cands:
            break
        best = min(cands, key=key)
        p = _best_port(best)
        taken.setdefault(best["device"], []).append(idx)
        rails.append(
            {
                "gpu": idx,
                "gpu_pci_address": g.get("pci_address"),
                "hca": best["device"],
                "port": p.get("port", 1),
                "link": links.get(best["device"]),
                "netdev": p.get("netdev"),
                "link_layer": p.get("link_layer"),
                "hca_pci_address": best.get("pci_address"),
            }
        )
    shared = {d: idxs for d, idxs in taken.items() if len(idxs) > 1}
    for r in rails:
        r["shared_with"] = [i for i in taken[r["hca"]] if i != r["gpu"]]
    order = []
    for r in rails:
        if r["hca"] not in order:
            order.append(r["hca"])
    return {"rails": rails, "rail_hcas": order, "rail_count": len(order), "shared_hcas": shared}


# --------------------------------------------------------------------------------------
# top level
# --------------------------------------------------------------------------------------


def summarize_fabric(entries: list[dict], warnings: list[str]) -> dict:
    """One node-level view of the per-GPU ``nvidia-smi -q`` Fabric sections."""
    first = entries[0]
    keys = {(e.get("cluster_uuid"), e.get("clique_id")) for e in entries}
    if len(keys) > 1:
        warnings.append(f"GPUs report different NVLink fabric cliques: {sorted(map(str, keys))}")
    statuses = sorted({str(e.get("status")) for e in entries})
    return {
        "state": first.get("state"),
        "status": first.get("status") if len(statuses) == 1 else "inconsistent",
        "clique_id": first.get("clique_id") if len(keys) == 1 else None,
        "cluster_uuid": first.get("cluster_uuid") if len(keys) == 1 else None,
        "health_summary": (first.get("health") or {}).get("summary"),
        "gpus_reporting": len(entries),
    }


def _device_facts(raw: dict) -> dict:
    gpus, hcas, nvswitches = raw["gpus"], raw["hcas"], raw["nvswitches"]
    return {
        "gpus": gpus,
        "gpu_count": len(gpus),
        "gpu_architectures": sorted({g["architecture"] for g in gpus}),
        "hca_functions": raw["hca_functions"],
        "hcas": hcas,
        "hca_count": len(hcas),
        "nvlink": {
            "nvswitch_count": len(nvswitches),
            "nvswitches": nvswitches,
            "present": bool(nvswitches),
            "source": "pci" if nvswitches else None,
            "links_per_gpu_pair": None,
        },
        "warnings": [],
    }


def gather_device_facts(root: str = "/") -> dict:
    """The devices sysfs lists, all readable before any driver is loaded: GPUs, NVSwitches (``nvlink``), the
    Mellanox/NVIDIA Ethernet and InfiniBand functions found by PCI vendor id (``hca_functions``) and the RDMA
    devices the kernel registered (``hcas``).  No affinity, rails or fabric, so none of their warnings."""
    return _device_facts(read_sysfs(root))


def _gpu_products(gpus: list[dict], query_text: str, warnings: list[str]) -> list[str]:
    """The product names the driver gives the GPUs sysfs found (nvidia-smi --query-gpu; the PCI tree has only
    device ids), distinct and sorted; a GPU the driver lists that sysfs lacks is a warning."""
    addresses = {g["pci_address"] for g in gpus}
    products = set()
    for row in parse_nvidia_smi_query_csv(query_text):
        if row.get("pci_address") not in addresses:
            warnings.append(f"nvidia-smi lists {row.get('name')} at {row.get('pci_bus_id')}, which sysfs does not have")
        elif row.get("name"):
            products.add(row["name"])
    return sorted(products)


def gather_hw_facts(
    root: str = "/",
    topo_text: str | None = None,
    ibdev2netdev_text: str | None = None,
    nvidia_smi_q_text: str | None = None,
    mix_link_layers: bool = False,
    nvidia_smi_query_text: str | None = None,
) -> dict:
    """All hardware facts for one node.  Raises ParseError when a given text is unusable."""
    raw = read_sysfs(root)
    devices = _device_facts(raw)
    warnings: list[str] = devices["warnings"]
    gpus, hcas = raw["gpus"], raw["hcas"]
    hca_names = [h["device"] for h in hcas]

    if ibdev2netdev_text:
        by_dev = {h["device"]: h for h in hcas}
        for e in parse_ibdev2netdev(ibdev2netdev_text):
            h = by_dev.get(e["device"])
            if h is None:
                warnings.append(f"ibdev2netdev lists {e['device']} which sysfs does not have")
                continue
            for p in h["ports"]:
                if p["port"] == e["port"]:
                    p["netdev"] = p.get("netdev") or e["netdev"]
                    p["netdev_link"] = e["link"]

    single_numa = len(raw["numa_nodes"]) <= 1
    pci = raw["pci"]
    affinity: dict[int, dict[str, str]] = {}
    source = "sysfs"
    topo = None
    if topo_text:
        topo = parse_nvidia_smi_topo(topo_text)
        t_aff = _topo_affinity(topo, gpus, hca_names, warnings)
        if t_aff is not None:
            affinity = t_aff
            source = "nvidia-smi topo"
    if source == "sysfs":
        for g in gpus:
            ga = pci[g["pci_address"]]
            affinity[g["index"]] = {}
            for h in hcas:
                hb = pci.get(h["pci_address"]) if h["pci_address"] else None
                affinity[g["index"]][h["device"]] = pci_link(ga, hb, single_numa) if hb else "SYS"

    rails = select_rails(gpus, hcas, affinity, warnings, mix_link_layers)

    if topo and topo["nvlink"]:
        devices["nvlink"].update(present=True, source="nvidia-smi topo", links_per_gpu_pair=topo["nvlink_max_links"])
    rail_layers = sorted({r["link_layer"] for r in rails["rails"] if r.get("link_layer")})
    roce_v2 = False
    for r in rails["rails"]:
        h = next(h for h in hcas if h["device"] == r["hca"])
        p = next((p for p in h["ports"] if p["port"] == r["port"]), {})
        if r.get("link_layer") == "Ethernet" and "RoCE v2" in (p.get("roce_versions") or []):
            roce_v2 = True
    if gpus and raw["default_interface"] is None:
        warnings.append("no IPv4 default route: NCCL_SOCKET_IFNAME falls back to excluding lo and docker bridges")
    fabric = summarize_fabric(parse_nvidia_smi_q_fabric(nvidia_smi_q_text), warnings) if nvidia_smi_q_text else None
    products = _gpu_products(gpus, nvidia_smi_query_text, warnings) if nvidia_smi_query_text else []
    return {
        **devices,
        "affinity": {str(k): v for k, v in affinity.items()},
        "affinity_source": source,
        "rails": rails["rails"],
        "rail_hcas": rails["rail_hcas"],
        "rail_count": rails["rail_count"],
        "shared_hcas": {k: v for k, v in rails["shared_hcas"].items()},
        "rdma_link_layers": rail_layers,
        "roce_v2": roce_v2,
        "fabric": fabric,
        "gpu_products": products,
        "numa_nodes": {str(k): v for k, v in raw["numa_nodes"].items()},
        "default_interface": raw["default_interface"],
    }
