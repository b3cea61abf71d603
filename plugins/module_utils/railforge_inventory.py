"""Inventory validation: groups, required variables, types, duplicates and likely typos, all reported at once.

Used by the railforge_inventory_check module, which playbooks/site.yml runs before anything changes.
"""

import difflib
import ipaddress
import re
from collections import defaultdict

CONTROL_PLANE = "kube_control_plane"
NODES = "kube_node"
# Groups Railforge reads, and the group each must sit inside.
KNOWN_GROUPS = {
    CONTROL_PLANE: None,
    NODES: None,
    "gpu_nodes": NODES,
    "rdma_nodes": NODES,
    "nvswitch_nodes": "gpu_nodes",
    "storage_nodes": None,
    "k8s_cluster": None,
}
REQUIRED_GROUPS = (CONTROL_PLANE, NODES)

# Inventory-level variables (role variables come from each role's meta/argument_specs.yml).
INVENTORY_VARIABLES = {
    "railforge_cluster_name": {"type": "str", "required_for": "all", "pattern": "dns_label"},
    "railforge_node_ip": {"type": "str", "pattern": "address"},
    "railforge_gpu_count": {"type": "int", "required_for": "gpu_nodes", "min": 1, "max": 72},
    "railforge_gpu_product": {"type": "str"},
    "railforge_rdma_link_layer": {
        "type": "str",
        "required_for": "rdma_nodes",
        "choices": ["infiniband", "ethernet"],
    },
    "railforge_rdma_hcas": {"type": "list", "elements": "str", "required_for": "rdma_nodes"},
    "railforge_rdma_rate_gbps": {"type": "int", "min": 1, "max": 1600},
    "railforge_topology": {"type": "dict"},
}
TYPE_HELP = {
    "str": "a string",
    "int": "an integer",
    "bool": "true or false",
    "list": "a list",
    "dict": "a mapping",
    "float": "a number",
    "path": "a path string",
}
# Variables Ansible itself puts into hostvars.
MAGIC_VARIABLES = {
    "inventory_hostname",
    "inventory_hostname_short",
    "inventory_dir",
    "inventory_file",
    "group_names",
    "groups",
    "omit",
    "playbook_dir",
    "play_hosts",
    "role_names",
}
DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9-]{1,63})*$")


def is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
        return True
    except ValueError:
        return bool(HOSTNAME.match(value))


def type_ok(value, expected: str) -> bool:
    checks = {
        "str": lambda v: isinstance(v, str),
        "path": lambda v: isinstance(v, str),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "list": lambda v: isinstance(v, list),
        "dict": lambda v: isinstance(v, dict),
    }
    return checks.get(expected, lambda v: True)(value)


def describe(value) -> str:
    return f"{value!r} ({type(value).__name__})"


def check_value(name: str, value, spec: dict) -> list[str]:
    """Problems of one variable's value against its spec (type, elements, choices, range, pattern)."""
    expected = spec.get("type", "raw")
    if not type_ok(value, expected):
        return [f"{name} must be {TYPE_HELP.get(expected, expected)}, got {describe(value)}"]
    problems = []
    if "elements" in spec and isinstance(value, list):
        problems += [
            f"{name}[{i}] must be {TYPE_HELP.get(spec['elements'], spec['elements'])}, got {describe(item)}"
            for i, item in enumerate(value)
            if not type_ok(item, spec["elements"])
        ]
    if "choices" in spec and not isinstance(value, list | dict) and value not in spec["choices"]:
        problems.append(f"{name} must be one of {', '.join(map(str, spec['choices']))}, got {value!r}")
    if ("min" in spec and value < spec["min"]) or ("max" in spec and value > spec["max"]):
        problems.append(f"{name} must be between {spec['min']} and {spec['max']}, got {value}")
    if spec.get("pattern") == "dns_label" and not DNS_LABEL.match(value):
        problems.append(f"{name} must be a DNS label (lowercase letters, digits, '-'), got {value!r}")
    if spec.get("pattern") == "address" and not is_address(value):
        problems.append(f"{name} must be an IP address or host name, got {value!r}")
    return problems


def likely_meant(name: str, known) -> str | None:
    """The known name `name` is probably a typo of: close spelling, or the same words in another order."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.85)
    if close:
        return close[0]
    words = sorted(name.split("_"))
    return next((candidate for candidate in sorted(known) if sorted(candidate.split("_")) == words), None)


def role_prefixes(specs: dict[str, dict]) -> set[str]:
    return {name.split("_")[0] + "_" for name in specs} | {"railforge_"}


def validate(groups: dict[str, list[str]], hostvars: dict[str, dict], role_specs: dict[str, dict]) -> list[str]:
    """Every problem of the inventory, one line each, sorted; empty when the inventory is sound."""
    specs = {**role_specs, **INVENTORY_VARIABLES}
    problems: list[str] = []
    problems += _check_groups(groups)
    per_message: dict[str, list[str]] = defaultdict(list)
    for host in sorted(hostvars):
        for message in _check_host(host, hostvars[host], groups, specs):
            per_message[message].append(host)
    for message, hosts in per_message.items():
        shown = ", ".join(hosts[:5]) + (f" (+{len(hosts) - 5} more)" if len(hosts) > 5 else "")
        problems.append(f"{shown}: {message}")
    problems += _check_duplicate_addresses(hostvars)
    return sorted(problems)


def _check_groups(groups: dict[str, list[str]]) -> list[str]:
    problems = []
    for name in REQUIRED_GROUPS:
        if not groups.get(name):
            problems.append(f"group {name} is missing or empty: list its hosts in the inventory")
    for name, parent in KNOWN_GROUPS.items():
        if parent is None:
            continue
        outside = sorted(set(groups.get(name, [])) - set(groups.get(parent, [])))
        if outside:
            problems.append(
                f"{', '.join(outside)} in {name} but not in {parent}: every {name} host must be in {parent}"
            )
    control_plane = groups.get(CONTROL_PLANE, [])
    if len(control_plane) > 1 and len(control_plane) % 2 == 0:
        problems.append(
            f"group {CONTROL_PLANE} has {len(control_plane)} hosts: etcd needs an odd number (1, 3 or 5) for quorum"
        )
    for name in sorted(set(groups) - set(KNOWN_GROUPS) - {"all", "ungrouped"}):
        close = difflib.get_close_matches(name, KNOWN_GROUPS, n=1, cutoff=0.8)
        if close:
            problems.append(f"unknown group {name}: did you mean {close[0]}?")
    return problems


def _check_host(host: str, variables: dict, groups: dict[str, list[str]], specs: dict[str, dict]) -> list[str]:
    problems = []
    if not DNS_LABEL.match(host):
        problems.append(
            f"host name {host!r} is not a valid Kubernetes node name (lowercase letters, digits, '-', at most 63)"
        )
    prefixes = role_prefixes(specs)
    for name in sorted(variables):
        if name in MAGIC_VARIABLES or name.startswith("ansible_"):
            continue
        if name in specs:
            problems += check_value(name, variables[name], specs[name])
            continue
        meant = likely_meant(name, specs)
        if meant:
            problems.append(f"unknown variable {name}: did you mean {meant}?")
        elif any(name.startswith(prefix) for prefix in prefixes):
            problems.append(f"unknown variable {name}: no role declares it (see docs/variables.md)")
    for name, spec in INVENTORY_VARIABLES.items():
        group = spec.get("required_for")
        if group and name not in variables and (group == "all" or host in groups.get(group, [])):
            where = "every host (set it in group_vars/all)" if group == "all" else f"hosts in {group}"
            problems.append(f"{name} is required for {where}")
    address = variables.get("railforge_node_ip", variables.get("ansible_host"))
    if "railforge_node_ip" not in variables and isinstance(address, str) and not is_address(address):
        problems.append(f"ansible_host must be an IP address or host name, got {address!r}")
    return problems


def _check_duplicate_addresses(hostvars: dict[str, dict]) -> list[str]:
    by_address: dict[str, list[str]] = defaultdict(list)
    for host, variables in hostvars.items():
        address = variables.get("railforge_node_ip", variables.get("ansible_host"))
        if isinstance(address, str):
            by_address[address].append(host)
    return [
        f"hosts {', '.join(sorted(hosts))} share the address {address}: each node needs its own"
        for address, hosts in sorted(by_address.items())
        if len(hosts) > 1
    ]
