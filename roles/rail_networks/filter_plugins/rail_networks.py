# Railforge - filters turning the nodes' hardware facts into per-rail networks, RDMA resources and NCCL classes.
"""Jinja2 filters of the rail_networks role: rail_networks_rails, rail_networks_rdma_config, rail_networks_nccl_classes.

Each takes ``{node name: railforge_hw facts}`` (the nodes' hostvars) and raises AnsibleFilterError naming the
variable at fault and what was expected, so the role stops before it changes anything.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path

from ansible.errors import AnsibleFilterError

# The CIDR checks shared with the sriov_network role (plugins/module_utils, loaded by path: a filter cannot import
# ansible.module_utils.* of the project).
_SPEC = importlib.util.spec_from_file_location(
    "railforge_networks", Path(__file__).resolve().parents[3] / "plugins/module_utils/railforge_networks.py"
)
railforge_networks = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(railforge_networks)

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# The CNI plugins a rail can use, and the field naming the rail's netdev (the same name on every node).
NETDEV_CNI = {"ipoib": "master", "macvlan": "master", "host-device": "device"}


def _rails_of(node: str, facts) -> list[dict]:
    """The node's rails in GPU order, one per distinct HCA port, checked for the fields the networks need."""
    if not isinstance(facts, dict) or not isinstance(facts.get("rails"), list):
        raise AnsibleFilterError(
            f"rail_networks_nodes: node {node} has no railforge_hw facts with a list of rails "
            "(gather them with the railforge_hw_facts module)"
        )
    pci = {h.get("device"): h.get("pci_address") for h in facts.get("hcas", []) if isinstance(h, dict)}
    rails, seen = [], set()
    for rail in facts["rails"]:
        if not isinstance(rail, dict) or not all(rail.get(k) for k in ("hca", "netdev", "link_layer")):
            raise AnsibleFilterError(
                f"rail_networks_nodes: node {node} has a rail without hca, netdev and link_layer: {rail!r}"
            )
        key = (rail["hca"], rail.get("port", 1))
        if key not in seen:
            seen.add(key)
            rails.append({**rail, "pci_address": pci.get(rail["hca"])})
    return rails


def _cidrs(cidrs, count: int) -> list[str]:
    try:
        return railforge_networks.network_ranges("rail_networks_cidrs", cidrs, count, "rail")
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from None


def rail_networks_rails(nodes: dict, cidrs, cni_types: dict, name_prefix: str = "rail") -> list[dict]:
    """One entry per rail position: its name, CIDR, link layer, CNI type and each node's netdev / HCA / PCI address.

    Rail i is the i-th distinct rail HCA port in GPU order on every node; nodes without rails (no RDMA) are left
    out. Every node with rails must have as many, each of the same link layer as on the other nodes.
    """
    if not isinstance(nodes, dict) or not nodes:
        raise AnsibleFilterError("rail_networks_nodes: expected at least one node with railforge_hw facts")
    if not isinstance(name_prefix, str) or not DNS_LABEL.match(f"{name_prefix}0"):
        raise AnsibleFilterError(f"rail_networks_name_prefix: {name_prefix!r} + a number must be a DNS label")
    per_node = {node: _rails_of(node, facts) for node, facts in sorted(nodes.items())}
    per_node = {node: rails for node, rails in per_node.items() if rails}
    if not per_node:
        raise AnsibleFilterError("rail_networks_nodes: no node has rails; nothing to build networks for")
    counts = {node: len(rails) for node, rails in per_node.items()}
    if len(set(counts.values())) > 1:
        raise AnsibleFilterError(
            f"rail_networks_nodes: every node needs the same number of rails, got {json.dumps(counts)}"
        )
    count = next(iter(counts.values()))
    ranges = _cidrs(cidrs, count)
    result = []
    for index in range(count):
        at = {node: rails[index] for node, rails in per_node.items()}
        layers = sorted({rail["link_layer"] for rail in at.values()})
        if len(layers) > 1:
            raise AnsibleFilterError(f"rail_networks_nodes: rail {index} is {' and '.join(layers)} on different nodes")
        layer = layers[0].lower()
        cni = cni_types.get(layer) if isinstance(cni_types, dict) else None
        if cni not in NETDEV_CNI:
            raise AnsibleFilterError(
                f"rail_networks_cni_types: link layer {layer} (rail {index}) needs one of "
                f"{', '.join(sorted(NETDEV_CNI))}, got {cni!r}"
            )
        netdevs = sorted({rail["netdev"] for rail in at.values()})
        if len(netdevs) > 1:
            raise AnsibleFilterError(
                f"rail_networks_cni_types: {cni} names the rail's netdev, but rail {index} is "
                f"{', '.join(netdevs)} on different nodes; expected one name on every node"
            )
        result.append(
            {
                "index": index,
                "name": f"{name_prefix}{index}",
                "cidr": ranges[index],
                "link_layer": layer,
                "cni_type": cni,
                "netdevs": netdevs,
                "hcas": sorted({rail["hca"] for rail in at.values()}),
                "pci_addresses": sorted({rail["pci_address"] for rail in at.values() if rail["pci_address"]}),
            }
        )
    return result


def rail_networks_cni_config(rail: dict) -> dict:
    """The NetworkAttachmentDefinition's CNI configuration of one rail: its CNI type over the rail's netdev, and a
    whereabouts range."""
    config = {"cniVersion": "0.3.1", "name": rail["name"], "type": rail["cni_type"]}
    config[NETDEV_CNI[rail["cni_type"]]] = rail["netdevs"][0]
    if rail["cni_type"] == "macvlan":
        config["mode"] = "bridge"
    config["ipam"] = {"type": "whereabouts", "range": rail["cidr"]}
    return config


def rail_networks_rdma_config(rails: list[dict], prefix: str, selector: str, hca_max: int) -> dict:
    """The RDMA shared device plugin's config.json: one resource per rail, named like the rail, selecting the
    rail's netdevs (ifNames) or PCI addresses."""
    if selector not in ("ifNames", "pciAddresses"):
        raise AnsibleFilterError(f"rail_networks_rdma_selector: expected ifNames or pciAddresses, got {selector!r}")
    key = "netdevs" if selector == "ifNames" else "pci_addresses"
    resources = []
    for rail in rails:
        if not rail[key]:
            raise AnsibleFilterError(
                f"rail_networks_rdma_selector: rail {rail['index']} has no {selector} in the facts"
            )
        resources.append(
            {
                "resourceName": rail["name"],
                "resourcePrefix": prefix,
                "rdmaHcaMax": hca_max,
                "selectors": {selector: rail[key]},
            }
        )
    return {"periodicUpdateInterval": 300, "configList": resources}


def rail_networks_nccl_classes(envs: dict) -> dict:
    """{node: NCCL env} -> {class: {"env": env, "nodes": [...]}}; nodes with identical env share a class named by
    the first 10 hex digits of the env's SHA-256 (sorted JSON), so the name only changes when the env does."""
    classes: dict[str, dict] = {}
    for node, env in sorted(envs.items()):
        name = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:10]
        classes.setdefault(name, {"env": env, "nodes": []})["nodes"].append(node)
    return classes


def rail_networks_topology_labels(topologies: dict) -> dict:
    """{node: railforge_topology} -> {node: {"railforge.io/<level>": name}}, leaving out nodes without a place.

    The pre-flight has checked the levels (the scheduler's) and that each name is a label value.
    """
    return {
        node: {f"railforge.io/{level}": str(name) for level, name in topology.items()}
        for node, topology in topologies.items()
        if topology
    }


class FilterModule:
    def filters(self):
        return {
            "rail_networks_rails": rail_networks_rails,
            "rail_networks_cni_config": rail_networks_cni_config,
            "rail_networks_rdma_config": rail_networks_rdma_config,
            "rail_networks_nccl_classes": rail_networks_nccl_classes,
            "rail_networks_topology_labels": rail_networks_topology_labels,
        }
