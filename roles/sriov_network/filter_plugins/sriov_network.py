# Railforge - filters turning the nodes' sriov_vfs settings into SR-IOV resource pools and their networks.
"""Jinja2 filters of the sriov_network role: sriov_network_pools, sriov_network_device_config,
sriov_network_cni_config.

sriov_network_pools takes ``{node name: sriov_vfs_pfs}`` (the nodes' hostvars) and raises AnsibleFilterError naming
the host and variable at fault and what was expected, so the role stops before it changes anything.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from ansible.errors import AnsibleFilterError

# The CIDR checks shared with the rail_networks role (plugins/module_utils, loaded by path: a filter cannot import
# ansible.module_utils.* of the project).
_SPEC = importlib.util.spec_from_file_location(
    "railforge_networks", Path(__file__).resolve().parents[3] / "plugins/module_utils/railforge_networks.py"
)
railforge_networks = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(railforge_networks)

PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
# A pool name serves as the device plugin's resourceName (letters, digits, _) and as the NetworkAttachmentDefinition's
# name (a DNS label): lowercase letters and digits fit both.
POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,40}$")
# sriov_vfs link_type -> the netdev link type the device plugin selects by, and the CNI plugin of the pool's network.
LINK_TYPES = {"eth": ("ether", "sriov"), "ib": ("infiniband", "ib-sriov")}
# Every PF sriov_vfs splits is a ConnectX (vendor 15b3); its VFs run mlx5_core and each has its own RDMA device.
CONNECTX_VENDOR = "15b3"
CONNECTX_VF_DRIVER = "mlx5_core"


def _pfs_of(node: str, pfs) -> list[dict]:
    """The node's PFs in list order, each checked for what a pool needs."""
    if not isinstance(pfs, list):
        raise AnsibleFilterError(f"sriov_vfs_pfs of {node}: expected a list of PFs, got {type(pfs).__name__}")
    for index, pf in enumerate(pfs):
        where = f"sriov_vfs_pfs[{index}] of {node}"
        if not isinstance(pf, dict) or not PCI_ADDRESS.match(str(pf.get("pci_address"))):
            raise AnsibleFilterError(f"{where}: expected a pci_address like 0000:3b:00.0, got {pf!r}")
        if pf.get("link_type") not in LINK_TYPES:
            raise AnsibleFilterError(
                f"{where}: link_type must be eth or ib for its SR-IOV pool (the device plugin selects VFs by link "
                f"type), got {pf.get('link_type')!r}"
            )
        if not isinstance(pf.get("num_vfs"), int) or isinstance(pf["num_vfs"], bool) or pf["num_vfs"] < 0:
            raise AnsibleFilterError(f"{where}: num_vfs must be a count of VFs, got {pf.get('num_vfs')!r}")
    return pfs


def sriov_network_pools(nodes: dict, cidrs, name_prefix: str = "sriov") -> list[dict]:
    """One pool per PF position: pool i holds the VFs of the i-th PF of sriov_vfs_pfs on every node.

    Nodes without PFs are left out; none at all gives no pools. Every other node must list as many PFs, the i-th of
    the same link type, and a PCI address may be the PF of one pool only. ``cidrs`` is [] (no networks) or one
    entry per pool, "" for a pool without a NetworkAttachmentDefinition.
    """
    if not isinstance(nodes, dict):
        raise AnsibleFilterError("sriov_network_nodes: expected inventory hosts")
    if not isinstance(name_prefix, str) or not POOL_NAME.match(f"{name_prefix}0"):
        raise AnsibleFilterError(
            f"sriov_network_name_prefix: {name_prefix!r} + a number must be lowercase letters and digits, "
            "starting with a letter (a resource name and a DNS label)"
        )
    per_node = {node: _pfs_of(node, pfs or []) for node, pfs in sorted(nodes.items())}
    per_node = {node: pfs for node, pfs in per_node.items() if pfs}
    if not per_node:
        return []
    counts = {node: len(pfs) for node, pfs in per_node.items()}
    if len(set(counts.values())) > 1:
        raise AnsibleFilterError(
            "sriov_vfs_pfs: every SR-IOV node needs the same number of PFs (pool i is the i-th PF on each node), "
            f"got {json.dumps(counts)}"
        )
    count = next(iter(counts.values()))
    try:
        ranges = (
            [""] * count
            if cidrs == []
            else railforge_networks.network_ranges("sriov_network_cidrs", cidrs, count, "pool", optional=True)
        )
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from None
    pool_of_address: dict[str, int] = {}
    pools = []
    for index in range(count):
        at = {node: pfs[index] for node, pfs in per_node.items()}
        link_types = {}
        for node, pf in at.items():
            link_types.setdefault(pf["link_type"], []).append(node)
            first = pool_of_address.setdefault(pf["pci_address"], index)
            if first != index:
                raise AnsibleFilterError(
                    f"sriov_vfs_pfs[{index}] of {node}: {pf['pci_address']} is PF {first} on another node; a PCI "
                    "address must hold the same position on every node (it would select its VFs into two pools)"
                )
        if len(link_types) > 1:
            seen = "; ".join(f"{kind} on {', '.join(hosts)}" for kind, hosts in sorted(link_types.items()))
            raise AnsibleFilterError(
                f"sriov_vfs_pfs[{index}]: link_type differs between nodes ({seen}); pool {name_prefix}{index} "
                "needs one link type"
            )
        link_type = next(iter(link_types))
        pools.append(
            {
                "index": index,
                "name": f"{name_prefix}{index}",
                "link_type": link_type,
                "root_devices": sorted({pf["pci_address"] for pf in at.values()}),
                "vfs": {node: pf["num_vfs"] for node, pf in at.items()},
                "cidr": ranges[index],
            }
        )
    return pools


def sriov_network_device_config(pools: list[dict], resource_prefix: str) -> dict:
    """The SR-IOV network device plugin's config.json: a resource <prefix>/<pool> per pool, selecting the ConnectX
    VFs of the pool's PFs (rootDevices) with the pool's link type, each with its RDMA device (isRdma)."""
    return {
        "resourceList": [
            {
                "resourceName": pool["name"],
                "resourcePrefix": resource_prefix,
                "selectors": {
                    "vendors": [CONNECTX_VENDOR],
                    "drivers": [CONNECTX_VF_DRIVER],
                    "rootDevices": pool["root_devices"],
                    "linkTypes": [LINK_TYPES[pool["link_type"]][0]],
                    "isRdma": True,
                },
            }
            for pool in pools
        ]
    }


def sriov_network_cni_config(pool: dict) -> dict:
    """The NetworkAttachmentDefinition's CNI configuration of one pool: sriov (Ethernet) or ib-sriov (InfiniBand)
    over the VF the device plugin allocated, and a whereabouts range."""
    return {
        "cniVersion": "0.3.1",
        "name": pool["name"],
        "type": LINK_TYPES[pool["link_type"]][1],
        "ipam": {"type": "whereabouts", "range": pool["cidr"]},
    }


class FilterModule:
    def filters(self):
        return {
            "sriov_network_pools": sriov_network_pools,
            "sriov_network_device_config": sriov_network_device_config,
            "sriov_network_cni_config": sriov_network_cni_config,
        }
