"""Inventory validation: every variable of every role and of the inventory, checked before anything changes.

Types, choices, list elements and nested options come from each role's meta/argument_specs.yml (and from
playbooks/site.meta.yml, written in the same shape); what an argument spec cannot say lives in RULES (ranges,
formats, unique items) and CROSS_RULES (rules between variables). Every problem is returned at once, one line
each, naming hosts, variable, value (secrets masked) and what was expected.

Used by the railforge_inventory_check action (plugins/action), which playbooks/preflight.yml runs first.
No Ansible import on purpose: the unit tests and scripts/role_docs.py import it too.
"""

import difflib
import importlib
import ipaddress
import os
import re
import sys
from collections import defaultdict
from pathlib import Path

import yaml

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

# Inventory-level variables: playbooks/site.meta.yml, written like a role's argument_specs; `required_for` names
# the group whose hosts must set a variable. scripts/role_docs.py writes them into docs/variables.md.
CHECKOUT = Path(__file__).resolve().parents[2]
INVENTORY_SPEC = CHECKOUT / "playbooks/site.meta.yml"
INVENTORY_VARIABLES = yaml.safe_load(INVENTORY_SPEC.read_text())["argument_specs"]["main"]["options"]

# DOCA-Host installation profiles (NVIDIA's DOCA Profiles page, 2.9 to 3.2) and MLNX_OFED meta packages.
DOCA_PROFILES = ("doca-all", "doca-networking", "doca-ofed", "doca-roce", "doca-host-basic")
MLNX_OFED_PROFILES = (
    "mlnx-ofed-all",
    "mlnx-ofed-basic",
    "mlnx-ofed-dpdk",
    "mlnx-ofed-guest",
    "mlnx-ofed-hpc",
    "mlnx-ofed-hypervisor",
    "mlnx-ofed-kernel-only",
    "mlnx-ofed-vma",
)

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
HOST_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
# user:password@ inside a URL: the password is what gets masked.
URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:)[^/@\s]+@")
# scheme://[userinfo@]host[:port] at the start of a URL.
URL_HEAD = re.compile(r"^(?P<scheme>[a-z]+)://(?:[^/@\s]+@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[^/:\s]+)(?::(?P<port>\d+))?")
MASK = "********"


def mask(text: str) -> str:
    """Text with every URL password replaced by the mask."""
    return URL_PASSWORD.sub(lambda m: m.group("head") + MASK + "@", text)


def shown(value) -> str:
    """A value as problems print it: URL passwords masked, type named."""
    return f"{mask(repr(value))} ({type_name(value)})"


def type_name(value) -> str:
    """The builtin type's name (Ansible hands over str/int/... subclasses that carry their origin)."""
    return next(kind.__name__ for kind in type(value).__mro__ if kind.__module__ == "builtins")


# --- formats: each returns None when the value is right, else what was expected ------------------------------


def _ipv4_help(value: str) -> str | None:
    """When `value` is four dot-separated numbers that are not an IPv4 address, say why."""
    parts = value.split(".")
    if len(parts) == 4 and all(part.isdigit() for part in parts):
        try:
            ipaddress.IPv4Address(value)
        except ValueError:
            return "an IPv4 address (four numbers 0-255)"
    return None


def is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
        return True
    except ValueError:
        return False


def host_problem(value: str) -> str | None:
    """An IP address or a host name; dotted numbers that are no IPv4 address are refused, never taken as names."""
    if is_ip(value):
        return None
    labels = value.rstrip(".").split(".")
    if (
        len(value) <= 253
        and all(HOST_LABEL.match(label) for label in labels)
        and not labels[-1].isdigit()  # a name's last label is never all digits: 10.0.0.400 is a broken address
    ):
        return None
    return _ipv4_help(value) or "an IP address or a host name"


def _url_problem(value: str, schemes: tuple[str, ...], example: str) -> str | None:
    match = URL_HEAD.match(value)
    expected = f"a {'/'.join(schemes)} URL like {example}"
    if value.startswith("file:") and "file" in schemes:
        return None if re.match(r"^file:/?/?/\S+$", value) else expected
    if not match or match["scheme"] not in schemes or re.search(r"\s", value):
        return expected
    host = match["host"].strip("[]")
    if host_problem(host) or (match["port"] and not 0 < int(match["port"]) < 65536):
        return expected
    return None


def _regex(pattern: str, expected: str):
    compiled = re.compile(pattern)
    return lambda value: None if compiled.match(value) else expected


def _empty_or(check):
    return lambda value: None if value == "" else check(value)


def _no_proxy_problem(value: str) -> str | None:
    """A no_proxy entry: *, a host, a .domain (or *.domain), an address or a CIDR."""
    if value == "*":
        return None
    entry = value.removeprefix("*").removeprefix(".")
    try:
        ipaddress.ip_network(entry, strict=False)
        return None
    except ValueError:
        return "a host, .domain, address or CIDR" if host_problem(entry) else None


def _host_port_problem(value: str) -> str | None:
    match = re.match(r"^(\[(?P<v6>[0-9A-Fa-f:]+)\]|(?P<host>[^:\[\]]+)):(?P<port>\d{1,5})$", value)
    expected = "HOST:PORT like localhost:5555 ([IPv6]:PORT for an IPv6 address)"
    if not match or not 0 < int(match["port"]) < 65536:
        return expected
    if match["v6"]:
        return None if is_ip(match["v6"]) else expected
    return None if not host_problem(match["host"]) else expected


def _sysctl_keys_problem(value: dict) -> str | None:
    bad = [key for key in value if not re.match(r"^[a-z0-9_\-]+(\.[A-Za-z0-9_\-]+)+$", str(key))]
    return f"sysctl keys like net.ipv4.ip_forward, not {', '.join(map(repr, bad))}" if bad else None


def railforge_module(name: str):
    """A module of the railforge package: the installed one, else the checkout's sources."""
    try:
        return importlib.import_module(name)
    except ImportError:
        sys.path.insert(0, str(CHECKOUT / "src"))
        return importlib.import_module(name)


def topology_keys() -> tuple[str, ...]:
    """The levels railforge_topology may name: the scheduler's railforge.io/<level> node labels."""
    settings = railforge_module("railforge.k8s.settings")
    return tuple(
        label.removeprefix(settings.LABEL_PREFIX)
        for level in settings.DEFAULT_TOPOLOGY
        for label in level.labels
        if label.startswith(settings.LABEL_PREFIX)
    )


# A Kubernetes label value: at most 63 characters, alphanumeric at both ends.
LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.\-]{0,61}[A-Za-z0-9])?$")


def _topology_problem(value: dict) -> str | None:
    keys = topology_keys()
    bad = [
        f"{k}: {v!r}" for k, v in value.items() if k not in keys or not (isinstance(v, str) and LABEL_VALUE.match(v))
    ]
    if not bad:
        return None
    return (
        f"levels {', '.join(keys)} mapped to label values (leaf: leaf-01; letters, digits, '-', '_', '.', at most 63), "
        f"not {', '.join(bad)}"
    )


def _scheduler_settings_problem(value: dict) -> str | None:
    """The scheduler's own validation (railforge.k8s.settings), the one the scheduler runs when it starts."""
    settings = railforge_module("railforge.k8s.settings")
    try:
        settings.settings_from_mapping(value)
    except settings.SettingsError as error:
        return f"settings the scheduler accepts (docs/scheduler.md): {error}"
    return None


def _registry_mirrors_problem(value: dict) -> str | None:
    bad = [
        f"{registry}: {mirrors!r}"
        for registry, mirrors in value.items()
        if FORMATS["registry"](str(registry))
        or not isinstance(mirrors, list)
        or any(not isinstance(url, str) or _proxy_url_problem(url) or "@" in url.split("/")[2] for url in mirrors)
    ]
    if not bad:
        return None
    # containerd's hosts.toml is world-readable and takes no login: a mirror that needs one is the registry's
    # credentials' business (containerd's registry auth), never a URL's
    return (
        "registry hosts mapped to lists of http(s) mirror URLs like https://mirror.example.com:5000, without a "
        f"login, not {', '.join(bad)}"
    )


def _cidr_problem(value: str) -> str | None:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        return "a network address with prefix and no host bits, like 10.100.0.0/16"
    return None


NODE_RANGE_PREFIX = 24  # the IPv4 pod range kube-controller-manager gives each node (its default node CIDR size)


def _pod_subnet_problem(value: str) -> str | None:
    """A pod network that holds at least 4 node ranges (an IPv6 one always does)."""
    network = None if _cidr_problem(value) else ipaddress.ip_network(value)
    if network is None or (network.version == 4 and network.prefixlen > NODE_RANGE_PREFIX - 2):
        return (
            f"a network address of at least 4 node ranges (/{NODE_RANGE_PREFIX} each: /{NODE_RANGE_PREFIX - 2} or "
            "larger), like 10.244.0.0/16"
        )
    return None


def _collectors_help_problem(value: str) -> str | None:
    if re.search(r"[,\n]", value):
        return "help text without commas or line breaks (the collectors CSV has none)"
    return None


def _ip_problem(value: str) -> str | None:
    return None if is_ip(value) else (_ipv4_help(value) or "an IP address")


def _repo_url_problem(value: str) -> str | None:
    return _url_problem(value, ("http", "https", "file"), "https://mirror.example.com/repo")


def _proxy_url_problem(value: str) -> str | None:
    return _url_problem(value, ("http", "https"), "http://proxy.example.com:3128")


SHA256 = re.compile(r"^sha256:[0-9a-f]{64}$")
# REGISTRY/NAME:TAG (a digest, NAME@sha256:HEX, matches too).
IMAGE = re.compile(r"^[^\s:]+(:[0-9]+)?/[^\s]+:[^\s:/]+$")
IMAGE_HELP = "an image REGISTRY/NAME:TAG"
FILE_NAME = re.compile(r"^[A-Za-z0-9._+~\-]+$")


def _sha256_by_file_problem(value: dict) -> str | None:
    bad = [
        f"{key}: {item!r}"
        for key, item in value.items()
        if not (isinstance(key, str) and FILE_NAME.match(key) and isinstance(item, str) and SHA256.match(item))
    ]
    if bad:
        return f"file names mapped to sha256: and 64 lowercase hex digits, not {', '.join(bad)}"
    return None


def _cuda_repo_distribution_problem(value: str) -> str | None:
    """One of the distributions the nvidia_driver role supports (its vars/main.yml lists them)."""
    supported = yaml.safe_load((CHECKOUT / "roles/nvidia_driver/vars/main.yml").read_text())[
        "nvidia_driver_distributions"
    ]
    if value in supported:
        return None
    return f"a distribution the CUDA repository is supported for ({', '.join(supported)})"


def _resources_problem(value: dict) -> str | None:
    """Kubernetes container resources: requests and limits, each of cpu and memory, nothing else."""
    parts = ("requests", "limits")
    if sorted(value) == sorted(parts) and all(
        isinstance(value[part], dict) and sorted(value[part]) == ["cpu", "memory"] for part in parts
    ):
        return None
    return "{requests: {cpu, memory}, limits: {cpu, memory}}"


def _scheduler_name_problem(value: str) -> str | None:
    if len(value) <= 253 and re.match(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$", value):
        return None
    return "a scheduler name (a DNS subdomain) or '' for no gang scheduling"


# Formats that check a mapping (its keys or values); every other format checks a string.
DICT_FORMATS = {"sysctl_keys", "topology", "sha256_by_file", "scheduler_settings", "registry_mirrors", "resources"}
FORMATS = {
    "ip": _ip_problem,
    "ip_or_empty": _empty_or(_ip_problem),
    "host": host_problem,
    "dns_label": _regex(DNS_LABEL.pattern, "a DNS label (lowercase letters, digits, '-', at most 63)"),
    "proxy_url": _empty_or(_proxy_url_problem),
    "repo_url": _repo_url_problem,
    "repo_url_or_empty": _empty_or(_repo_url_problem),
    "no_proxy": _no_proxy_problem,
    "host_port": _host_port_problem,
    "host_port_or_empty": _empty_or(_host_port_problem),
    "package": _regex(r"^[a-z0-9][a-z0-9+.\-]+$", "a Debian package name"),
    "debian_version": _regex(r"^([0-9]+:)?[0-9][0-9A-Za-z.+~\-]*$", "a Debian package version like 2.5.1-1"),
    "dcgm_version": _regex(r"^1:4\.[0-9]+\.[0-9]+-[0-9A-Za-z.~]+$", "a DCGM 4 version with epoch like 1:4.5.2-1"),
    "dcgm_field": _regex(r"^DCGM_FI_[A-Z0-9_]+$", "a DCGM field name (DCGM_FI_...)"),
    "release": _regex(r"^[0-9][0-9A-Za-z.\-]*$", "a release like 2.9.1 or 24.10-1.1.4.0"),
    "driver_branch": _regex(r"^[0-9]{3}$", 'a driver branch of three digits like "580"'),
    "cuda_version": _regex(r"^[0-9]{2}\.[0-9]+$", 'a CUDA version MAJOR.MINOR like "12.8"'),
    "kernel_module": _regex(r"^[A-Za-z0-9_\-]+$", "a kernel module name"),
    "kernel_arg": _regex(r"^[A-Za-z0-9_.\-]+(=[A-Za-z0-9_.,:\-]+)?$", "a kernel argument like iommu=pt"),
    "sysctl_keys": _sysctl_keys_problem,
    "hca": _regex(r"^[A-Za-z0-9_]+$", "an RDMA device name like mlx5_0"),
    "netdev": _regex(r"^[A-Za-z0-9_.:\-]{1,15}$", "an interface name (at most 15 characters)"),
    "pci_address": _regex(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", "a PCI address like 0000:3b:00.0"),
    "absolute_path": _regex(r"^/", "an absolute path"),
    "semver": _regex(r"^[0-9]+\.[0-9]+\.[0-9]+$", "MAJOR.MINOR.PATCH without a leading v"),
    "image": _regex(IMAGE.pattern, IMAGE_HELP),
    "go_toolchain": _regex(r"^go[0-9]+\.[0-9]+(\.[0-9]+)?$", "a Go toolchain name like go1.26.8"),
    "topology": _topology_problem,
    "scheduler_settings": _scheduler_settings_problem,
    "registry_mirrors": _registry_mirrors_problem,
    "command": _regex(r"^[A-Za-z0-9_.+/\-]+$", "a command name or path"),
    "fingerprint_or_empty": _regex(
        r"^([0-9A-Fa-f]{4} ?){10}$|^$", "an OpenPGP key fingerprint of 40 hex digits (gpg --show-keys prints it)"
    ),
    "fingerprint": _regex(
        r"^([0-9A-Fa-f]{4} ?){10}$", "an OpenPGP key fingerprint of 40 hex digits (gpg --show-keys prints it)"
    ),
    "key_long_id": _regex(r"^[0-9A-Fa-f]{16}$", "an OpenPGP key long id of 16 hex digits like A024F6F0E6D6A281"),
    "registry": _regex(
        r"^[^\s:/]+(:[0-9]+)?(/[^\s:/]+)*$", "a registry HOST[:PORT][/PATH] without a scheme or trailing /"
    ),
    "image_or_empty": _empty_or(_regex(IMAGE.pattern, IMAGE_HELP)),
    "sha256": _regex(SHA256.pattern, "sha256: and 64 lowercase hex digits"),
    "sha256_by_file": _sha256_by_file_problem,
    "file_name": _regex(r"^[A-Za-z0-9._\-]+$", "a file name"),
    "cuda_repo_distribution": _cuda_repo_distribution_problem,
    "cuda_repo_arch": _regex(r"^(x86_64|sbsa)$", "a CUDA repository architecture, x86_64 or sbsa"),
    "doca_distribution": _regex(r"^[a-z]+[0-9][0-9.]*$", "a DOCA repository distribution like ubuntu24.04 or debian12"),
    "gdrcopy_os": _regex(r"^[a-z]+[0-9][0-9_]*$", "a GDRCopy download directory like ubuntu24_04"),
    "no_comma": _collectors_help_problem,
    "cidr": _cidr_problem,
    "pod_subnet": _pod_subnet_problem,
    "cidr_or_empty": _empty_or(_cidr_problem),
    "dns_name": _regex(
        r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$", "a DNS name like railforge.io"
    ),
    "pool_prefix": _regex(r"^[a-z][a-z0-9]{0,39}$", "lowercase letters and digits, starting with a letter"),
    "duration": _regex(r"^([0-9]+(ms|s|m|h))+$", "a duration like 30s"),
    "duration_hms": _regex(r"^([0-9]+[hms])+$", "a duration like 15m"),
    "not_empty": _regex(r"^.", "a non-empty string"),
    "netdev_or_empty": _empty_or(_regex(r"^[A-Za-z0-9_.:\-]{1,15}$", "an interface name (at most 15 characters)")),
    "manifest_url": _regex(r"^(https?://[^\s/]+|file://)/[^\s]+$", "an http://, https:// or file:/// URL of a file"),
    "resources": _resources_problem,
    "scheduler_name_or_empty": _scheduler_name_problem,
    "resource_prefix": _regex(r"^[a-z0-9][-a-z0-9_.]*$", "lowercase letters, digits, '-', '_', '.'"),
    "dcgm_exporter_version": _regex(
        r"^([0-9]+:)?[0-9]+\.[0-9]+\.[0-9]+-[0-9A-Za-z.~]+$", "a Debian package version like 4.8.1-1"
    ),
    "container_toolkit_version": _regex(
        r"^[0-9]+\.[0-9]+\.[0-9]+(~[A-Za-z0-9.]+)?-[0-9A-Za-z.~]+$", "a Debian package version like 1.17.8-1"
    ),
    "batch_size": _regex(r"^([1-9][0-9]*|([1-9][0-9]?|100)%)$", "a count of nodes or a percentage like 25%"),
}

# What argument specs cannot say, one entry per variable (ITEM[].option for options of list items):
# min/max (inclusive), format (a FORMATS key, applied to each element of a list), unique (list items, or the
# named option of dict items, listed once), min_items (the fewest items of a list or mapping).
RULES = {
    "ansible_host": {"format": "host"},
    "railforge_cluster_name": {"format": "dns_label"},
    "railforge_node_ip": {"format": "ip"},
    "railforge_gpu_count": {"min": 1, "max": 72},
    "railforge_rdma_hcas": {"format": "hca", "unique": True},
    "railforge_rdma_rate_gbps": {"min": 1, "max": 1600},
    "railforge_topology": {"format": "topology"},
    "railforge_extra_doca_profiles": {"format": "package"},
    "railforge_serial": {"format": "batch_size", "min": 1},
    "railforge_max_fail_percentage": {"min": 0, "max": 100},
    "common_extra_packages": {"format": "package"},
    "common_ntp_servers": {"format": "host"},
    "common_kernel_modules": {"format": "kernel_module"},
    "common_sysctls": {"format": "sysctl_keys"},
    "common_http_proxy": {"format": "proxy_url"},
    "common_https_proxy": {"format": "proxy_url"},
    "common_no_proxy": {"format": "no_proxy"},
    "cuda_toolkit_versions": {"format": "cuda_version", "unique": True},
    "cuda_toolkit_default_version": {"format": "cuda_version"},
    "doca_ofed_version": {"format": "release"},
    "doca_ofed_mlnx_ofed_version": {"format": "release"},
    "doca_ofed_base_url": {"format": "repo_url"},
    "doca_ofed_mlnx_ofed_base_url": {"format": "repo_url"},
    "doca_ofed_repo_url": {"format": "repo_url"},
    "doca_ofed_repo_key_url": {"format": "repo_url"},
    "doca_ofed_repo_key_fingerprint": {"format": "fingerprint_or_empty"},
    "doca_ofed_repo_key_long_id": {"format": "key_long_id"},
    "doca_ofed_package": {"format": "package"},
    "doca_ofed_extra_packages": {"format": "package"},
    "doca_ofed_hw_root": {"format": "absolute_path"},
    "doca_ofed_repo_distro": {"format": "doca_distribution"},
    "gpudirect_gdrcopy_version": {"format": "debian_version"},
    "gpudirect_gdrcopy_packages": {"format": "package"},
    "gpudirect_gdrcopy_repo_url": {"format": "repo_url_or_empty"},
    "gpudirect_gdrcopy_repo_key_url": {"format": "repo_url_or_empty"},
    "gpudirect_gdrcopy_repo_key_fingerprint": {"format": "fingerprint_or_empty"},
    "gpudirect_gdrcopy_base_url": {"format": "repo_url"},
    "gpudirect_gdrcopy_cuda": {"format": "cuda_version"},
    "gpudirect_gdrcopy_os": {"format": "gdrcopy_os"},
    "gpudirect_gdrcopy_sha256": {"format": "sha256_by_file"},
    "gpudirect_kernel_args": {"format": "kernel_arg"},
    "gpudirect_hw_root": {"format": "absolute_path"},
    "nvidia_container_toolkit_version": {"format": "container_toolkit_version"},
    "nvidia_container_toolkit_repo_url": {"format": "repo_url"},
    "nvidia_container_toolkit_repo_key_url": {"format": "repo_url"},
    "nvidia_container_toolkit_repo_key_fingerprint": {"format": "fingerprint_or_empty"},
    "nvidia_container_toolkit_cdi_spec": {"format": "absolute_path"},
    "nvidia_dcgm_version": {"format": "dcgm_version"},
    "nvidia_dcgm_exporter_version": {"format": "dcgm_exporter_version"},
    "nvidia_dcgm_exporter_listen_address": {"format": "ip_or_empty"},
    "nvidia_dcgm_exporter_port": {"min": 1, "max": 65535},
    "nvidia_dcgm_exporter_hostengine": {"format": "host_port"},
    "nvidia_dcgm_exporter_collectors": {"unique": "field", "min_items": 1},
    "nvidia_dcgm_exporter_collectors[].field": {"format": "dcgm_field"},
    "nvidia_dcgm_exporter_collectors[].help": {"format": "no_comma"},
    "nvidia_driver_branch": {"format": "driver_branch"},
    "nvidia_driver_repo_base_url": {"format": "repo_url"},
    "nvidia_driver_repo_key_url": {"format": "repo_url"},
    "nvidia_driver_repo_key_fingerprint": {"format": "fingerprint_or_empty"},
    "nvidia_driver_repo_distribution": {"format": "cuda_repo_distribution"},
    "nvidia_driver_repo_arch": {"format": "cuda_repo_arch"},
    "nvidia_driver_reboot_timeout": {"min": 1, "max": 86400},
    "nvidia_driver_hw_root": {"format": "absolute_path"},
    "nvidia_fabricmanager_hw_root": {"format": "absolute_path"},
    "roce_qos_rails": {"unique": "netdev"},
    "roce_qos_rails[].netdev": {"format": "netdev"},
    "roce_qos_rails[].mtu": {"min": 1280, "max": 9216},
    "roce_qos_mtu": {"min": 1280, "max": 9216},
    "roce_qos_pfc_priority": {"min": 0, "max": 7},
    "roce_qos_traffic_class": {"min": 0, "max": 255},
    "roce_qos_mlnx_qos": {"format": "command"},
    "sriov_vfs_pfs": {"unique": "pci_address"},
    "sriov_vfs_pfs[].pci_address": {"format": "pci_address"},
    "sriov_vfs_pfs[].num_vfs": {"min": 0, "max": 127},
    "sriov_vfs_mlxconfig": {"format": "command"},
    "versions_kubernetes": {"format": "semver"},
    "versions_etcd": {"format": "semver"},
    "versions_containerd": {"format": "semver"},
    "versions_runc": {"format": "semver"},
    "versions_crictl": {"format": "semver"},
    "versions_mpi_operator": {"format": "semver"},
    "versions_pause_image": {"format": "image"},
    "versions_go_toolchain": {"format": "go_toolchain"},
    "versions_nvidia_driver_branch": {"format": "driver_branch"},
    "versions_cuda_toolkit": {"format": "cuda_version"},
    "versions_nvidia_container_toolkit": {"format": "debian_version"},
    "versions_nvidia_dcgm": {"format": "dcgm_version"},
    "versions_nvidia_dcgm_exporter": {"format": "debian_version"},
    "versions_doca": {"format": "release"},
    "versions_mlnx_ofed": {"format": "release"},
    "versions_gdrcopy": {"format": "debian_version"},
    "versions_gdrcopy_cuda": {"format": "cuda_version"},
    "versions_cuda_repo_url": {"format": "repo_url"},
    "versions_cuda_repo_key_file": {"format": "file_name"},
    "versions_cuda_repo_key_fingerprint": {"format": "fingerprint_or_empty"},
    "versions_nvidia_container_toolkit_repo_url": {"format": "repo_url"},
    "versions_nvidia_container_toolkit_repo_key_url": {"format": "repo_url"},
    "versions_nvidia_container_toolkit_repo_key_fingerprint": {"format": "fingerprint_or_empty"},
    "versions_doca_repo_url": {"format": "repo_url"},
    "versions_mlnx_ofed_repo_url": {"format": "repo_url"},
    "versions_doca_repo_key_url": {"format": "repo_url"},
    "versions_doca_repo_key_fingerprint": {"format": "fingerprint_or_empty"},
    "versions_doca_repo_key_long_id": {"format": "key_long_id"},
    "versions_gdrcopy_url": {"format": "repo_url"},
    "versions_gdrcopy_sha256": {"format": "sha256_by_file"},
    "versions_coredns": {"format": "semver"},
    "versions_flannel": {"format": "semver"},
    "versions_flannel_registry": {"format": "registry"},
    "versions_cni_plugins": {"format": "semver"},
    "versions_cni_plugins_package_revision": {"format": "release"},
    "versions_scheduler_plugins": {"format": "semver"},
    "versions_openmpi_image": {"format": "image"},
    "versions_etcd_image_tag": {"format": "release"},
    "versions_kubernetes_package_revision": {"format": "release"},
    "versions_containerd_package_revision": {"format": "release"},
    "versions_kubernetes_registry": {"format": "registry"},
    "versions_mpi_operator_registry": {"format": "registry"},
    "versions_railforge_scheduler_registry": {"format": "registry"},
    "versions_railforge_scheduler_tag": {"format": "semver"},
    "versions_multus_registry": {"format": "registry"},
    "versions_whereabouts_registry": {"format": "registry"},
    "versions_rdma_shared_device_plugin_registry": {"format": "registry"},
    "versions_kubernetes_apt_repo_url": {"format": "repo_url"},
    "versions_kubernetes_apt_repo_key_url": {"format": "repo_url"},
    "versions_kubernetes_apt_repo_key_fingerprint": {"format": "fingerprint"},
    "versions_containerd_apt_repo_url": {"format": "repo_url"},
    "versions_containerd_apt_repo_key_url": {"format": "repo_url"},
    "versions_containerd_apt_repo_key_fingerprint": {"format": "fingerprint"},
    "versions_mpi_operator_crd_url": {"format": "repo_url"},
    "versions_mpi_operator_crd_checksum": {"format": "sha256"},
    "versions_podgroup_crd_url": {"format": "repo_url"},
    "versions_podgroup_crd_checksum": {"format": "sha256"},
    "versions_sriov_network_device_plugin": {"format": "semver"},
    "versions_sriov_network_device_plugin_registry": {"format": "registry"},
    "versions_sriov_cni": {"format": "semver"},
    "versions_sriov_cni_registry": {"format": "registry"},
    "versions_ib_sriov_cni": {"format": "semver"},
    "versions_ib_sriov_cni_registry": {"format": "registry"},
    "sriov_network_cidrs": {"format": "cidr_or_empty"},
    "sriov_network_namespace": {"format": "dns_label"},
    "sriov_network_system_namespace": {"format": "dns_label"},
    "sriov_network_name_prefix": {"format": "pool_prefix"},
    "sriov_network_resource_prefix": {"format": "dns_name"},
    "sriov_network_device_plugin_image": {"format": "image"},
    "sriov_network_cni_image": {"format": "image"},
    "sriov_network_ib_cni_image": {"format": "image"},
    "kubernetes_apt_repo_url": {"format": "repo_url"},
    "kubernetes_apt_repo_key_url": {"format": "repo_url"},
    "kubernetes_apt_repo_key_fingerprint": {"format": "fingerprint"},
    "kubernetes_containerd_apt_repo_url": {"format": "repo_url_or_empty"},
    "kubernetes_containerd_apt_repo_key_url": {"format": "repo_url"},
    "kubernetes_containerd_apt_repo_key_fingerprint": {"format": "fingerprint"},
    "kubernetes_image_repository": {"format": "registry"},
    "kubernetes_sandbox_image": {"format": "image"},
    "kubernetes_image_archives": {"format": "absolute_path"},
    "kubernetes_version": {"format": "semver"},
    "kubernetes_registry_mirrors": {"format": "registry_mirrors"},
    "kubernetes_control_plane_endpoint": {"format": "host_port_or_empty"},
    "kubernetes_pod_subnet": {"format": "pod_subnet"},
    "kubernetes_service_subnet": {"format": "cidr"},
    "kubernetes_dns_domain": {"format": "dns_name"},
    "kubernetes_ready_timeout": {"min": 1, "max": 3600},
    "kubernetes_flannel_image": {"format": "image"},
    "kubernetes_flannel_namespace": {"format": "dns_label"},
    "kubernetes_flannel_iface": {"format": "netdev_or_empty"},
    "kubernetes_join_token_ttl": {"format": "duration_hms"},
    "kubernetes_kubeconfig": {"format": "not_empty"},
    "versions_multus": {"format": "semver"},
    "versions_whereabouts": {"format": "semver"},
    "versions_rdma_shared_device_plugin": {"format": "semver"},
    "rail_networks_cidrs": {"format": "cidr", "unique": True},
    "rail_networks_namespace": {"format": "dns_label"},
    "rail_networks_resource_prefix": {"format": "resource_prefix"},
    "rail_networks_system_namespace": {"format": "dns_label"},
    "rail_networks_rdma_hca_max": {"min": 1, "max": 10000},
    "rail_networks_nccl_gid_index": {"min": 0, "max": 255},
    "rail_networks_multus_image": {"format": "image"},
    "rail_networks_whereabouts_image": {"format": "image"},
    "rail_networks_rdma_device_plugin_image": {"format": "image"},
    "versions_nvidia_device_plugin": {"format": "semver"},
    "versions_nvidia_device_plugin_registry": {"format": "registry"},
    "versions_dcgm_exporter_registry": {"format": "registry"},
    "nvidia_device_plugin_namespace": {"format": "dns_label"},
    "nvidia_device_plugin_time_slicing_replicas": {"min": 1, "max": 1024},
    "nvidia_device_plugin_image": {"format": "image"},
    "railforge_scheduler_namespace": {"format": "dns_label"},
    "railforge_scheduler_image": {"format": "image"},
    "railforge_scheduler_replicas": {"min": 1, "max": 16},
    "railforge_scheduler_http_port": {"min": 1, "max": 65535},
    "railforge_scheduler_settings": {"format": "scheduler_settings"},
    "railforge_scheduler_resources": {"format": "resources"},
    "railforge_scheduler_podgroup_crd_url": {"format": "manifest_url"},
    "railforge_scheduler_podgroup_crd_checksum": {"format": "sha256"},
    "mpi_operator_namespace": {"format": "dns_label"},
    "mpi_operator_image": {"format": "image"},
    "mpi_operator_gang_scheduler": {"format": "scheduler_name_or_empty"},
    "mpi_operator_crd_url": {"format": "manifest_url"},
    "mpi_operator_crd_checksum": {"format": "sha256"},
    "mpi_operator_resources": {"format": "resources"},
    "railforge_benchmark_image": {"format": "image"},
    "railforge_benchmark_perftest_image": {"format": "image_or_empty"},
    "railforge_benchmark_resnet_image": {"format": "image_or_empty"},
    "dcgm_exporter_namespace": {"format": "dns_label"},
    "dcgm_exporter_image": {"format": "image"},
    "dcgm_exporter_port": {"min": 1, "max": 65535},
    "dcgm_exporter_metrics": {"unique": "field", "min_items": 1},
    "dcgm_exporter_remote_hostengine": {"format": "host_port_or_empty"},
    "dcgm_exporter_scrape_interval": {"format": "duration"},
    "dcgm_exporter_node_selector": {"min_items": 1},
    "dcgm_exporter_metrics[].field": {"format": "dcgm_field"},
    "dcgm_exporter_metrics[].help": {"format": "no_comma"},
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


def type_problem(name: str, value, expected: str) -> str:
    hint = ""
    if expected in ("int", "float") and isinstance(value, str) and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", value):
        hint = f": write {value} without quotes"
    elif expected == "bool" and isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
        hint = f": write {'true' if value.lower() in ('true', 'yes') else 'false'} without quotes"
    return f"{name} must be {TYPE_HELP.get(expected, expected)}, got {shown(value)}{hint}"


def check_value(name: str, value, spec: dict, rule_key: str | None = None) -> list[str]:
    """Problems of one value against its argument spec and its RULES entry, nested options included."""
    rule_key = rule_key or name
    expected = spec.get("type", "raw")
    if not type_ok(value, expected):
        return [type_problem(name, value, expected)]
    problems = []
    items = list(enumerate(value)) if isinstance(value, list) else []
    if "elements" in spec:
        for index, item in items:
            if not type_ok(item, spec["elements"]):
                problems.append(type_problem(f"{name}[{index}]", item, spec["elements"]))
        items = [(index, item) for index, item in items if type_ok(item, spec["elements"])]
    if "choices" in spec:
        candidates = [(f"{name}[{i}]", item) for i, item in items] if expected == "list" else [(name, value)]
        problems += [
            f"{label} must be one of {', '.join(map(str, spec['choices']))}, got {shown(item)}"
            for label, item in candidates
            if item not in spec["choices"]
        ]
    if "options" in spec:
        for index, item in items if expected == "list" else [(None, value)]:
            label = name if index is None else f"{name}[{index}]"
            problems += _check_options(label, item, spec["options"], rule_key)
    problems += _check_rule(name, value, RULES.get(rule_key, {}))
    return problems


def _check_options(label: str, item: dict, options: dict, rule_key: str) -> list[str]:
    problems = [
        f"{label} is missing {option}, which is required"
        for option, option_spec in options.items()
        if option_spec.get("required") and option not in item
    ]
    for key in item:
        if key not in options:
            close = difflib.get_close_matches(str(key), options, n=1, cutoff=0.6)
            hint = f": did you mean {close[0]}?" if close else f" (known: {', '.join(options)})"
            problems.append(f"{label} has an unknown option {key}{hint}")
        else:
            problems += check_value(f"{label}.{key}", item[key], options[key], f"{rule_key}[].{key}")
    return problems


def rule_text(name: str) -> str:
    """What RULES asks of a variable (or ``name[].option``), in words for the generated docs: its format, range,
    least items and what appears once; empty without a rule."""
    rule = RULES.get(name, {})
    low, high = rule.get("min"), rule.get("max")
    parts = [f"format {rule['format']}"] if "format" in rule else []
    if low is not None or high is not None:
        parts.append(
            f"{low} to {high}" if None not in (low, high) else f"at least {low}" if high is None else f"at most {high}"
        )
    if rule.get("min_items"):
        parts.append(f"at least {rule['min_items']} item(s)")
    if rule.get("unique"):
        parts.append("each item once" if rule["unique"] is True else f"each {rule['unique']} once")
    return "; ".join(parts)


def _check_rule(name: str, value, rule: dict) -> list[str]:
    problems = []
    values = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
    check_format = FORMATS.get(rule.get("format"))
    for index, item in values:
        label = name if index is None else f"{name}[{index}]"
        if check_format and isinstance(item, dict if rule["format"] in DICT_FORMATS else str):
            expected = check_format(item)
            if expected:
                problems.append(f"{label} must be {expected}, got {shown(item)}")
        if isinstance(item, int | float) and not isinstance(item, bool):
            low, high = rule.get("min"), rule.get("max")
            if (low is not None and item < low) or (high is not None and item > high):
                problems.append(f"{label} must be between {low} and {high}, got {item}")
    least = rule.get("min_items")
    if least and isinstance(value, list | dict) and len(value) < least:
        problems.append(f"{name} must have at least {least} item(s), got {shown(value)}")
    unique = rule.get("unique")
    if unique and isinstance(value, list):
        keys = [item.get(unique) if isinstance(item, dict) else item for item in value] if unique is not True else value
        seen = [key for key in keys if isinstance(key, str | int)]
        for key in sorted({key for key in seen if seen.count(key) > 1}, key=str):
            what = f"{unique} {key}" if unique is not True else repr(key)
            problems.append(f"{name} lists {what} more than once: each must appear once")
    return problems


# --- rules between variables --------------------------------------------------------------------------------


def _driver_version_in_branch(v: dict) -> str | None:
    version, branch = v["nvidia_driver_version"], v["nvidia_driver_branch"]
    if version == "" or re.match(rf"^{re.escape(branch)}\.[0-9]+(\.[0-9]+)?$", version):
        return None
    return (
        f"nvidia_driver_version must be a version of nvidia_driver_branch {branch} like {branch}.95.05 (or empty), "
        f"got {version!r}"
    )


def _cuda_default_in_versions(v: dict) -> str | None:
    versions, default = v["cuda_toolkit_versions"], v["cuda_toolkit_default_version"]
    if not versions:
        return "cuda_toolkit_versions must list at least one version"
    if default in versions:
        return None
    return f"cuda_toolkit_default_version must be one of cuda_toolkit_versions ({', '.join(versions)}), got {default!r}"


def _pod_and_service_networks_apart(v: dict) -> str | None:
    """kubeadm mode: the pod and service networks are separate ranges (the other networks are the cluster rule's)."""
    if v["kubernetes_mode"] != "kubeadm":
        return None
    pod, service = (ipaddress.ip_network(v[name]) for name in ("kubernetes_pod_subnet", "kubernetes_service_subnet"))
    if pod.version != service.version or not pod.overlaps(service):
        return None
    return f"kubernetes_pod_subnet {pod} and kubernetes_service_subnet {service} overlap: expected separate ranges"


# The oldest driver branch that runs each CUDA major (CUDA 12 from 525, CUDA 13 from 580).
CUDA_MAJOR_MIN_DRIVER = {12: 525, 13: 580}


def _dcgm_cuda_major_fits_driver(v: dict) -> str | None:
    major, branch = v["nvidia_dcgm_cuda_major"], v["nvidia_driver_branch"]
    needed = CUDA_MAJOR_MIN_DRIVER.get(major)
    if not branch.isdigit() or needed is None or int(branch) >= needed:
        return None
    fitting = [str(m) for m, low in sorted(CUDA_MAJOR_MIN_DRIVER.items()) if int(branch) >= low]
    return (
        f"nvidia_dcgm_cuda_major {major} needs nvidia_driver_branch {needed} or newer, got branch {branch}: "
        f"set nvidia_dcgm_cuda_major to {' or '.join(fitting) or 'a major this driver runs'}"
    )


def _roce_dscp_on_pfc_priority(v: dict) -> str | None:
    """With DSCP trust the adapter's default map puts DSCP d on priority d >> 3: RoCE must land on the PFC one."""
    if v["roce_qos_trust"] != "dscp" or not v["roce_qos_rails"]:
        return None
    traffic_class, priority = v["roce_qos_traffic_class"], v["roce_qos_pfc_priority"]
    dscp = traffic_class >> 2
    if dscp >> 3 == priority:
        return None
    return (
        f"roce_qos_traffic_class {traffic_class} carries DSCP {dscp}, which trust dscp maps to priority {dscp >> 3}, "
        f"but PFC is on roce_qos_pfc_priority {priority}: use a traffic class {priority * 32}-{priority * 32 + 31} "
        f"(DSCP {priority * 8}-{priority * 8 + 7}, e.g. {priority * 32 + 10}) or move PFC"
    )


def _doca_profile_known(v: dict) -> str | None:
    package, flavour = v["doca_ofed_package"], v["doca_ofed_flavour"]
    known = (DOCA_PROFILES if flavour == "doca" else MLNX_OFED_PROFILES) + tuple(v["railforge_extra_doca_profiles"])
    if package in known:
        return None
    return (
        f"doca_ofed_package must be a {flavour} profile ({', '.join(known)}), got {package!r}; "
        "list a site package in railforge_extra_doca_profiles to accept it"
    )


def _time_slicing_shares_a_resource(v: dict) -> str | None:
    """Time-slicing shares nvidia.com/gpu, which MIG strategy mixed does not advertise (it has mig-PROFILE ones)."""
    replicas, strategy = v["nvidia_device_plugin_time_slicing_replicas"], v["nvidia_device_plugin_mig_strategy"]
    if replicas == 1 or strategy != "mixed":
        return None
    return (
        f"nvidia_device_plugin_time_slicing_replicas {replicas} shares nvidia.com/gpu, which "
        "nvidia_device_plugin_mig_strategy mixed does not advertise: use MIG strategy none or single, or replicas 1"
    )


# pkgs.k8s.io serves one minor per repository (.../core:/stable:/v1.36/deb/).
SERVED_MINOR = re.compile(r"/v(?P<minor>[0-9]+\.[0-9]+)/")


def _kubernetes_version_served(v: dict) -> str | None:
    """The version must be of the minor the apt repository serves (a mirror's URL without /vX.Y/ is not judged)."""
    version, url = v["kubernetes_version"], v["kubernetes_apt_repo_url"]
    served, minor = SERVED_MINOR.search(url), version.rsplit(".", 1)[0]
    if not served or minor == served["minor"]:
        return None
    return (
        f"kubernetes_version {version} is not served by kubernetes_apt_repo_url {url}, which holds "
        f"{served['minor']}.x only: use a {served['minor']} patch release or the repository of {minor}"
    )


def _gang_scheduling_api_served(v: dict) -> str | None:
    """Kubernetes' own gang API is set on an API server kubeadm makes, and only 1.36 serves the version the
    scheduler reads (scheduling.k8s.io/v1alpha2; 1.37 moves it to v1beta1)."""
    if not v["kubernetes_gang_scheduling_api"]:
        return None
    if v["kubernetes_mode"] != "kubeadm":
        return (
            "kubernetes_gang_scheduling_api is true but kubernetes_mode is existing: an API server Railforge does not "
            "make is its owner's to configure (turn the gates on there)"
        )
    if not v["kubernetes_version"].startswith("1.36."):
        return (
            f"kubernetes_gang_scheduling_api is true but kubernetes_version is {v['kubernetes_version']}: expected "
            "1.36.x, whose API server serves scheduling.k8s.io/v1alpha2, the version the scheduler reads"
        )
    return None


def _iommu_passthrough_has_arguments(v: dict) -> str | None:
    if not v["gpudirect_iommu_passthrough"] or v["gpudirect_kernel_args"]:
        return None
    return "gpudirect_kernel_args must list the kernel arguments while gpudirect_iommu_passthrough is true, got []"


# Each: the variables it reads (host value, else the role default) and the check. A rule runs when the host
# sets one of its variables and every value it reads passes its own checks and is no template left to the role.
CROSS_RULES = (
    (("nvidia_driver_version", "nvidia_driver_branch"), _driver_version_in_branch),
    (("cuda_toolkit_versions", "cuda_toolkit_default_version"), _cuda_default_in_versions),
    (("nvidia_dcgm_cuda_major", "nvidia_driver_branch"), _dcgm_cuda_major_fits_driver),
    (
        ("roce_qos_traffic_class", "roce_qos_pfc_priority", "roce_qos_trust", "roce_qos_rails"),
        _roce_dscp_on_pfc_priority,
    ),
    (("doca_ofed_package", "doca_ofed_flavour", "railforge_extra_doca_profiles"), _doca_profile_known),
    (("kubernetes_version", "kubernetes_apt_repo_url"), _kubernetes_version_served),
    (("kubernetes_pod_subnet", "kubernetes_service_subnet", "kubernetes_mode"), _pod_and_service_networks_apart),
    (
        ("nvidia_device_plugin_time_slicing_replicas", "nvidia_device_plugin_mig_strategy"),
        _time_slicing_shares_a_resource,
    ),
    (("gpudirect_kernel_args", "gpudirect_iommu_passthrough"), _iommu_passthrough_has_arguments),
    (("kubernetes_gang_scheduling_api", "kubernetes_mode", "kubernetes_version"), _gang_scheduling_api_served),
)


def _gdrcopy_downloads_pinned(v: dict) -> str | None:
    """Source url downloads NVIDIA's .deb files, which come without checksums: each needs its sha256 pinned.

    The file names carry the node's OS and architecture (facts the check has not got), so here each package needs
    a pinned file of its version (<package>_<version>_<arch>.<Os>.deb); the role checks the exact names."""
    if not v["gpudirect_gdrcopy_enabled"] or v["gpudirect_gdrcopy_source"] != "url":
        return None
    version, pinned = v["gpudirect_gdrcopy_version"], v["gpudirect_gdrcopy_sha256"]
    unpinned = [
        package
        for package in v["gpudirect_gdrcopy_packages"]
        if not any(
            re.match(rf"^{re.escape(package)}_{re.escape(version)}_[a-z0-9]+\.[^/]+\.deb$", name) for name in pinned
        )
    ]
    if not unpinned:
        return None
    return (
        f"gpudirect_gdrcopy_sha256 pins no file of {', '.join(unpinned)} {version}, which gpudirect_gdrcopy_source url "
        "downloads (NVIDIA publishes no checksums for them): add each file the nodes download as "
        f"'{unpinned[0]}_{version}_<amd64|arm64>.<Os>.deb: sha256:<64 hex digits>' (e.g. "
        f"{unpinned[0]}_{version}_amd64.Ubuntu24_04.deb; sha256sum of the file checked and kept on your mirror), or "
        "set gpudirect_gdrcopy_source: apt with gpudirect_gdrcopy_repo_url and its key pointing at a signed mirror "
        "that holds the packages (docs/operations/offline-mirror.md), or gpudirect_gdrcopy_enabled: false"
    )


# Rules for every host of the group a role runs on (the variable naming that group, and its default), whatever the
# host sets: there the role's own defaults can be what is wrong, and the role would stop only after earlier roles.
GROUP_RULES = (
    (
        ("doca_ofed_hca_group", "rdma_nodes"),
        (
            "gpudirect_gdrcopy_enabled",
            "gpudirect_gdrcopy_source",
            "gpudirect_gdrcopy_version",
            "gpudirect_gdrcopy_packages",
            "gpudirect_gdrcopy_sha256",
        ),
        _gdrcopy_downloads_pinned,
    ),
)


# Variables that name an inventory group: when set, the group must exist.
GROUP_VARIABLES = (
    "common_etc_hosts_group",
    "nvidia_driver_gpu_group",
    "nvidia_fabricmanager_nvswitch_group",
    "doca_ofed_hca_group",
)


# --- the inventory as a whole --------------------------------------------------------------------------------


def likely_meant(name: str, known) -> str | None:
    """The known name `name` is probably a typo of: close spelling, or the same words in another order."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.85)
    if close:
        return close[0]
    words = sorted(name.split("_"))
    return next((candidate for candidate in sorted(known) if sorted(candidate.split("_")) == words), None)


def unprefixed_meaning(name: str, specs: dict[str, dict]) -> list[str]:
    """Role variables (or options of their items) that an unprefixed `name` was probably meant as."""
    meant = [known for known in sorted(specs) if known.endswith("_" + name)]
    meant += [f"{known}[].{name}" for known in sorted(specs) if name in (specs[known].get("options") or {})]
    return meant


def role_prefixes(specs: dict[str, dict]) -> set[str]:
    return {name.split("_")[0] + "_" for name in specs} | {"railforge_"}


def value_is_read(name: str, role_specs: dict[str, dict]) -> bool:
    """Whether validate() reads a variable's value: the other names (Ansible's magic and connection variables, and
    unknown names, which are refused by name) need not be rendered; ``groups`` alone lists every host, per host."""
    return name not in MAGIC_VARIABLES and (name in role_specs or name in INVENTORY_VARIABLES or name in RULES)


def role_specs(role_dir: Path) -> dict[str, dict]:
    """The options of a role's main entry point (meta/argument_specs.yml)."""
    path = role_dir / "meta/argument_specs.yml"
    if not path.is_file():
        return {}
    specs = (yaml.safe_load(path.read_text()) or {}).get("argument_specs", {}).get("main", {})
    return specs.get("options") or {}


def check_role(role: str, variables: dict, specs: dict[str, dict], groups: dict | None = None) -> list[str]:
    """Problems of one role's variables as the play sees them (`specs`: the role's options; `variables`: their
    values, those that could be rendered): each against its argument spec and RULES entry, as the pre-flight checks
    them, the CROSS_RULES whose variables all belong to the role and, given the inventory's `groups`, that a variable
    set to name a group (not left at its default) names one. Sorted, secrets masked."""
    problems: list[str] = []
    for name in sorted(variables):
        if name in specs:
            problems += check_value(name, variables[name], specs[name])
        elif name in RULES:
            problems += _check_rule(name, variables[name], RULES[name])
    for names, rule in CROSS_RULES:
        if all(name in specs and name in variables for name in names):
            problem = _run_rule(names, rule, variables, specs)
            if problem:
                problems.append(problem)
    if groups is not None:  # a group the role names by default may be absent: the role skips it, as the pre-flight
        chosen = {name: value for name, value in variables.items() if value != specs.get(name, {}).get("default")}
        problems += _check_group_names(chosen, groups)
    return sorted(mask(problem) for problem in problems)


def role_input_message(role: str, problems: list[str]) -> str:
    """The one message a role's input check fails with: every problem, one line each."""
    return f"Invalid input for role {role} (nothing was changed):\n- " + "\n- ".join(problems)


def validate(
    groups: dict[str, list[str]],
    hostvars: dict[str, dict],
    role_specs: dict[str, dict],
    controller: dict | None = None,
) -> list[str]:
    """Every problem of the inventory, one line each, sorted, secrets masked; empty when the inventory is sound.
    ``controller``: the variables the machine running Ansible reads (localhost's), when the inventory's whole is
    checked; None when only hosts' variables are."""
    specs = {**role_specs, **INVENTORY_VARIABLES}
    cluster = Cluster(groups, hostvars, specs, controller)
    problems: list[str] = []
    # a cluster you bring (kubernetes_mode: existing) needs no control plane or node group: Railforge installs none
    brought = cluster.value("kubernetes_mode") == "existing"
    problems += _check_groups(groups, () if brought else REQUIRED_GROUPS)
    per_message: dict[str, list[str]] = defaultdict(list)
    for host in sorted(hostvars):
        for message in _check_host(host, hostvars[host], groups, specs):
            per_message[message].append(host)
    for message, hosts in per_message.items():
        named = ", ".join(hosts[:5]) + (f" (+{len(hosts) - 5} more)" if len(hosts) > 5 else "")
        problems.append(f"{named}: {message}{cluster.origin(message, hosts)}")
    problems += _check_duplicate_addresses(hostvars)
    problems += [problem for rule in CLUSTER_RULES for problem in rule(cluster)]
    return sorted(mask(problem) for problem in problems)


def _check_groups(groups: dict[str, list[str]], required: tuple[str, ...]) -> list[str]:
    problems = []
    for name in required:
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
        if name in MAGIC_VARIABLES:
            continue
        if name in specs:
            problems += check_value(name, variables[name], specs[name])
        elif name in RULES:
            problems += _check_rule(name, variables[name], RULES[name])
        elif not name.startswith("ansible_"):
            problems += _unknown_variable(name, specs, prefixes)
    for name, spec in INVENTORY_VARIABLES.items():
        group = spec.get("required_for")
        if group and name not in variables and (group == "all" or host in groups.get(group, [])):
            where = "every host (set it in group_vars/all)" if group == "all" else f"hosts in {group}"
            problems.append(f"{name} is required for {where}")
    problems += _check_cross_rules(variables, specs)
    problems += _check_group_rules(host, variables, groups, specs)
    problems += _check_group_names(variables, groups)
    problems += _check_etc_hosts(host, variables, groups)
    problems += _check_hw_source(host, variables, groups)
    return problems


HW_GROUPS = ("gpu_nodes", "rdma_nodes")  # the nodes playbooks/facts.yml reads


def _check_hw_source(host: str, variables: dict, groups: dict[str, list[str]]) -> list[str]:
    """A node's railforge_hw comes from one place, said explicitly: read from the node (railforge_hw_source:
    gather, the default) or set in the inventory (inventory), never both and never neither."""
    if not any(host in groups.get(group, []) for group in HW_GROUPS):
        return []
    source, hand_set = variables.get("railforge_hw_source", "gather"), "railforge_hw" in variables
    if source == "inventory" and not hand_set:
        return [
            "railforge_hw_source is inventory but railforge_hw is not set: set the node's railforge_hw in the "
            "inventory (docs/hardware-facts.md) or leave railforge_hw_source unset to read it from the node"
        ]
    if source == "gather" and hand_set:
        return [
            "railforge_hw is set in the inventory but railforge_hw_source is gather (the default), so the facts read "
            "from the node would replace it: set railforge_hw_source: inventory to keep it, or remove railforge_hw"
        ]
    return []


def _unknown_variable(name: str, specs: dict[str, dict], prefixes: set[str]) -> list[str]:
    meant = likely_meant(name, specs)
    if meant:
        return [f"unknown variable {name}: did you mean {meant}?"]
    if any(name.startswith(prefix) for prefix in prefixes):
        return [f"unknown variable {name}: no role declares it (see docs/variables.md)"]
    unprefixed = unprefixed_meaning(name, specs)
    if unprefixed:
        return [
            f"unknown variable {name}: no role reads it (role variables carry their role's prefix); "
            f"did you mean {' or '.join(unprefixed)}?"
        ]
    return []


# A role default that names a pin of roles/versions ("{{ versions_doca }}") stands for that pin; one that writes pins
# into text ("{{ versions_railforge_scheduler_registry }}/railforge-scheduler:{{ ... }}") for the text they make.
PIN_REFERENCE = re.compile(r"^\{\{\s*(versions_[a-z0-9_]+)\s*\}\}$")
PIN_IN_TEXT = re.compile(r"\{\{\s*(versions_[a-z0-9_]+)\s*\}\}")


def _pins_read(name: str, specs: dict[str, dict]) -> list[str]:
    """The versions_* pins the default of `name` stands for (in a string or in list items)."""
    default = specs.get(name, {}).get("default")
    items = default if isinstance(default, list) else [default]
    return [pin for item in items if isinstance(item, str) for pin in PIN_IN_TEXT.findall(item)]


def resolve_pins(value, lookup):
    """`value` with each pin reference ("{{ versions_doca }}", alone, in text or as a list item) replaced by
    lookup(pin); a reference alone keeps the pin's type."""
    if isinstance(value, list):
        return [resolve_pins(item, lookup) for item in value]
    if not isinstance(value, str):
        return value
    match = PIN_REFERENCE.match(value)
    return lookup(match[1]) if match else PIN_IN_TEXT.sub(lambda pin: str(lookup(pin[1])), value)


def _effective(name: str, variables: dict, specs: dict[str, dict]):
    """The host's value of `name`, else its role default with pins resolved (the host's pin, else the pin's default)."""
    if name in variables:
        return variables[name]
    return resolve_pins(specs.get(name, {}).get("default"), lambda pin: _effective(pin, variables, specs))


def _run_rule(names, rule, variables: dict, specs: dict[str, dict]) -> str | None:
    """The rule's problem, when every value it reads passes its own checks and is no template left to the role."""
    values = {name: _effective(name, variables, specs) for name in names}
    usable = all(
        "{{" not in str(value) and not check_value(name, value, specs.get(name, {})) for name, value in values.items()
    )
    return rule(values) if usable else None


def _check_cross_rules(variables: dict, specs: dict[str, dict]) -> list[str]:
    problems = []
    for names, rule in CROSS_RULES:
        if not any(read in variables for name in names for read in (name, *_pins_read(name, specs))):
            continue
        problem = _run_rule(names, rule, variables, specs)
        if problem:
            problems.append(problem)
    return problems


def _check_group_rules(host: str, variables: dict, groups: dict[str, list[str]], specs: dict[str, dict]) -> list[str]:
    problems = []
    for (group_variable, default_group), names, rule in GROUP_RULES:
        group = variables.get(group_variable, default_group)
        if not isinstance(group, str) or host not in groups.get(group, []):
            continue
        problem = _run_rule(names, rule, variables, specs)
        if problem:
            problems.append(problem)
    return problems


def _check_group_names(variables: dict, groups: dict[str, list[str]]) -> list[str]:
    return [
        f"{name} must be an inventory group, got {variables[name]!r} (no such group)"
        for name in GROUP_VARIABLES
        if isinstance(variables.get(name), str) and variables[name] not in groups
    ]


def _check_etc_hosts(host: str, variables: dict, groups: dict[str, list[str]]) -> list[str]:
    """The common role writes each node's address into /etc/hosts: it must be an IP address."""
    group = variables.get("common_etc_hosts_group", "all")
    if variables.get("common_manage_etc_hosts", True) is not True or host not in groups.get(group, []):
        return []
    if "railforge_node_ip" in variables:
        return []
    address = variables.get("ansible_host")
    if isinstance(address, str) and not is_ip(address) and not host_problem(address):
        return [
            f"railforge_node_ip is needed: ansible_host {address!r} is no IP address and /etc/hosts needs one "
            "(or set common_manage_etc_hosts: false)"
        ]
    return []


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


# --- rules over the whole cluster ---------------------------------------------------------------------------

# Variables of the stages that run on the machine running Ansible (network, devices, scheduler, benchmark): there
# localhost reads group all alone, so a value set in another group or a host's vars would be ignored silently.
CONTROLLER_PREFIXES = (
    "rail_networks_",
    "sriov_network_",
    "railforge_scheduler_",
    "mpi_operator_",
    "nvidia_device_plugin_",
    "dcgm_exporter_",
    "railforge_benchmark_",
)
CONTROLLER_VARIABLES = ("kubernetes_mode", "kubernetes_kubeconfig")
# Groups whose hosts run the GPU or RDMA stages: a storage node is in none of them.
ACCELERATED_GROUPS = ("gpu_nodes", "rdma_nodes", "nvswitch_nodes")


class Cluster:
    """The inventory as the cluster-wide rules read it: groups, each host's variables, and where a value is set."""

    def __init__(
        self,
        groups: dict[str, list[str]],
        hostvars: dict[str, dict],
        specs: dict[str, dict],
        controller: dict | None = None,
    ):
        self.groups, self.hostvars, self.specs, self.controller = groups, hostvars, specs, controller
        self.hosts = sorted(hostvars)
        self.groups_of: dict[frozenset, list[str]] = defaultdict(list)
        for name, hosts in sorted(groups.items()):
            self.groups_of[frozenset(hosts)].append(name)
        control_plane = groups.get(CONTROL_PLANE) or self.hosts
        self.reference = control_plane[0] if control_plane else None

    def value(self, name: str):
        """The cluster's value (a control plane's: the stage-variable rule refuses values that differ by group)."""
        return _effective(name, self.hostvars.get(self.reference, {}), self.specs)

    def usable(self, name: str) -> bool:
        value = self.value(name)
        return "{{" not in str(value) and not check_value(name, value, self.specs.get(name, {}))

    def where(self, hosts) -> str:
        """The group whose hosts these are, else the hosts themselves."""
        chosen = frozenset(hosts)
        if chosen == frozenset(self.hosts):
            return "group all"
        if chosen in self.groups_of:  # groups of the same hosts: any of them
            return f"group {' or '.join(self.groups_of[chosen])}"
        named = sorted(chosen)
        return f"host_vars of {', '.join(named[:3])}" + (f" (+{len(named) - 3} more)" if len(named) > 3 else "")

    def origin(self, message: str, hosts: list[str]) -> str:
        """`` (set in <where>)`` for a problem of one variable (the message's first word) that ``hosts`` hold
        alike: the group of every host holding that value (when more than one does), else its hosts' host_vars."""
        name = message.split(" ", 1)[0]
        if (name not in self.specs and name not in RULES) or any(name not in self.hostvars[h] for h in hosts):
            return ""
        values = {repr(self.hostvars[host][name]) for host in hosts}
        if len(values) != 1:
            return ""
        (value,) = values
        alike = [
            host for host in self.hosts if name in self.hostvars[host] and repr(self.hostvars[host][name]) == value
        ]
        # one host alone: its name, in front of the message, is all that can be told
        return f" (set in {self.where(alike)})" if len(alike) > 1 else ""

    def set_in(self, name: str) -> str:
        hosts = [host for host in self.hosts if name in self.hostvars[host]]
        return self.where(hosts) if hosts else "its default"


def _controller_misses(controller: dict, name: str, value: str) -> bool:
    """Whether the machine running Ansible reads no such variable, or another value than ``value`` (a repr) the
    hosts hold (None: a value it could not render alone, e.g. one naming inventory_dir, is taken as seen)."""
    return name not in controller or (controller[name] is not None and repr(controller[name]) != value)


def _check_controller_variables(cluster: Cluster) -> list[str]:
    """Variables of the stages that run on the machine running Ansible (rail_networks_*, sriov_network_*,
    railforge_scheduler_*, mpi_operator_*, nvidia_device_plugin_*, dcgm_exporter_*, railforge_benchmark_*,
    kubernetes_mode, kubernetes_kubeconfig) hold one value on every host: set in group all, the only group
    localhost reads (a group that holds every host, as k8s_cluster does without storage nodes, is not all)."""
    names = {
        name
        for variables in cluster.hostvars.values()
        for name in variables
        if name.startswith(CONTROLLER_PREFIXES) or name in CONTROLLER_VARIABLES
    }
    problems = []
    for name in sorted(names):
        by_value: dict[str, list[str]] = defaultdict(list)
        for host in cluster.hosts:
            variables = cluster.hostvars[host]
            by_value[repr(variables[name]) if name in variables else ""].append(host)
        if len(by_value) == 1:
            # one value on every host, in a group localhost is not in (k8s_cluster when every host is in it)
            (value,) = by_value
            controller = cluster.controller
            if value and controller is not None and _controller_misses(controller, name, value):
                groups = [group for group in cluster.groups_of[frozenset(cluster.hosts)] if group != "all"]
                where = f"group {' or '.join(groups)}" if groups else "the host_vars of every host"
                problems.append(
                    f"{name} is set in {where} ({mask(value)}), but its stage runs on the machine running Ansible, "
                    "which reads group all alone and does not see it there: move it to group_vars/all"
                )
            continue
        places = "; ".join(
            f"{cluster.where(hosts)}: {mask(value)}" for value, hosts in sorted(by_value.items()) if value
        )
        problems.append(
            f"{name} is set per group or host ({places}), but its stage runs on the machine running Ansible, which "
            "reads group all alone: move it to group_vars/all, one value for the cluster"
        )
    return problems


def _check_accelerated_storage(cluster: Cluster) -> list[str]:
    """No storage_nodes host in gpu_nodes, rdma_nodes or nvswitch_nodes (one pulled in through a child group
    would get the GPU and RDMA stack): list the hosts of those groups by name."""
    storage = set(cluster.groups.get("storage_nodes", []))
    problems = []
    for group in ACCELERATED_GROUPS:
        pulled = sorted(storage & set(cluster.groups.get(group, [])))
        if pulled:
            problems.append(
                f"{', '.join(pulled)} in storage_nodes and in {group}: a storage node gets no GPU or RDMA stack; list "
                f"{group}'s hosts explicitly (no child groups) and take it out of one of them"
            )
    return problems


def _check_control_plane_endpoint(cluster: Cluster) -> list[str]:
    """More than one host in kube_control_plane (kubeadm mode) needs kubernetes_control_plane_endpoint."""
    control_plane = cluster.groups.get(CONTROL_PLANE, [])
    if len(control_plane) < 2 or cluster.value("kubernetes_mode") != "kubeadm":
        return []
    if cluster.value("kubernetes_control_plane_endpoint"):
        return []
    return [
        f"kubernetes_control_plane_endpoint is required with {len(control_plane)} hosts in {CONTROL_PLANE} (set in "
        f"{cluster.set_in('kubernetes_control_plane_endpoint')}): expected the HOST:PORT of a load balancer or "
        "virtual IP in front of their API servers, set in group_vars/all"
    ]


def _check_existing_kubeconfig(cluster: Cluster) -> list[str]:
    """kubernetes_mode existing: kubernetes_kubeconfig is a file the user running Ansible can read, on the machine
    running it."""
    if cluster.value("kubernetes_mode") != "existing" or not cluster.usable("kubernetes_kubeconfig"):
        return []
    path = Path(cluster.value("kubernetes_kubeconfig"))
    if path.is_file() and os.access(path, os.R_OK):
        return []
    state = "not readable" if path.is_file() else ("not a file" if path.exists() else "not there")
    return [
        f"kubernetes_kubeconfig (set in {cluster.set_in('kubernetes_kubeconfig')}) is {state}: kubernetes_mode "
        f"existing expects the kubeconfig of the cluster you bring at {str(path)!r} on the machine running Ansible, "
        "readable by the user running it"
    ]


def _check_local_images(cluster: Cluster) -> list[str]:
    """An image the cluster stages deploy from the localhost registry (what a local build such as
    deploy/scheduler/build.sh names it) is on no registry the nodes pull from: on nodes the kubernetes stage makes
    (kubeadm mode) only kubernetes_image_archives can put it there, else it must be pushed and named by its
    registry. The nodes of a cluster you bring may have it loaded by hand; the benchmark's images are left to
    benchmark.yml, which runs on its own."""
    if cluster.value("kubernetes_mode") != "kubeadm" or cluster.value("kubernetes_image_archives"):
        return []
    problems = []
    for name, rule in sorted(RULES.items()):
        # pins are read through the role variables that use them
        if rule.get("format") != "image" or name.startswith(("versions_", "railforge_benchmark_")):
            continue
        if name not in cluster.specs or not cluster.usable(name):
            continue
        value = cluster.value(name)
        if value.startswith("localhost/"):
            problems.append(
                f"{name} is {value!r} (set in {cluster.set_in(name)}), an image only the machine that built it has: "
                "push it to a registry the nodes pull from and name that registry (the scheduler's: "
                "versions_railforge_scheduler_registry), or load its archive onto the nodes with "
                'kubernetes_image_archives (README, "Deploy")'
            )
    return problems


def _networks(cluster: Cluster) -> list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    """The cluster's networks, each named by its variable (and index): pod and service networks (kubeadm mode),
    rail networks and SR-IOV pools. Values that fail their own checks are left to those."""
    named = []
    if cluster.value("kubernetes_mode") == "kubeadm":
        named += [(name, cluster.value(name)) for name in ("kubernetes_pod_subnet", "kubernetes_service_subnet")]
    for name in ("rail_networks_cidrs", "sriov_network_cidrs"):
        values = cluster.value(name)
        if isinstance(values, list):
            named += [(f"{name}[{index}]", value) for index, value in enumerate(values)]
    networks = []
    for name, value in named:
        if isinstance(value, str) and value and not _cidr_problem(value):
            networks.append((name, ipaddress.ip_network(value)))
    return networks


POD_AND_SERVICE = {"kubernetes_pod_subnet", "kubernetes_service_subnet"}


def _check_network_overlaps(cluster: Cluster) -> list[str]:
    """The pod and service networks (kubeadm mode), each rail network and each SR-IOV pool are separate ranges, and
    no node address (railforge_node_ip, else ansible_host) lies inside one."""
    networks = _networks(cluster)
    problems = []
    for position, (name, network) in enumerate(networks):
        for other_name, other in networks[position + 1 :]:
            if {name, other_name} == POD_AND_SERVICE:
                continue  # a rule between the kubernetes role's own variables: CROSS_RULES', which the role runs too
            if network.version == other.version and network.overlaps(other):
                problems.append(
                    f"{name} {network} (set in {cluster.set_in(name.split('[')[0])}) overlaps {other_name} {other}: "
                    "expected separate address ranges for the pod, service, rail and SR-IOV networks"
                )
    inside: dict[tuple[str, str], list[str]] = defaultdict(list)
    for host in cluster.hosts:
        variables = cluster.hostvars[host]
        source = "railforge_node_ip" if "railforge_node_ip" in variables else "ansible_host"
        address = variables.get(source)
        if not isinstance(address, str) or not is_ip(address):
            continue
        ip = ipaddress.ip_address(address)
        for name, network in networks:
            if ip.version == network.version and ip in network:
                inside[(source, f"{name} {network}")].append(f"{host} ({ip})")
    for (source, network), hosts in sorted(inside.items()):
        named = ", ".join(hosts[:5]) + (f" (+{len(hosts) - 5} more)" if len(hosts) > 5 else "")
        problems.append(
            f"{source} of {named} lies inside {network}: node addresses must be outside every cluster network"
        )
    return problems


def _usable_addresses(size: int) -> int:
    """Addresses a range of `size` hands out: the network and broadcast addresses aside, below /31."""
    return size - 2 if size > 2 else size


def _check_rail_ranges(cluster: Cluster) -> list[str]:
    """With nodes in rail_networks_nodes (default rdma_nodes): one rail_networks_cidrs network per rail (per
    railforge_rdma_hcas entry), each with an address for every node on that rail."""
    nodes = cluster.value("rail_networks_nodes")
    if not isinstance(nodes, list):  # its default: the rdma_nodes group
        nodes = cluster.groups.get("rdma_nodes", [])
    if not cluster.usable("rail_networks_cidrs"):
        return []
    rails = {
        len(cluster.hostvars[node]["railforge_rdma_hcas"])
        for node in nodes
        if isinstance(cluster.hostvars.get(node, {}).get("railforge_rdma_hcas"), list)
    }
    if len(rails) != 1:
        return []  # no RDMA node: no rails; nodes with different counts: the network stage names them from facts
    count, cidrs = rails.pop(), cluster.value("rail_networks_cidrs")
    where = cluster.set_in("rail_networks_cidrs")
    if len(cidrs) != count:
        return [
            f"rail_networks_cidrs (set in {where}) lists {len(cidrs)} networks: expected one per rail, {count} "
            f"(the railforge_rdma_hcas of the {len(nodes)} nodes in rail_networks_nodes)"
        ]
    problems = []
    for index, cidr in enumerate(cidrs):
        network = ipaddress.ip_network(cidr)
        usable = _usable_addresses(network.num_addresses)
        if usable < len(nodes):
            problems.append(
                f"rail_networks_cidrs[{index}] {cidr} (set in {where}) has {usable} addresses for {len(nodes)} nodes "
                f"on that rail: expected a prefix of /{_prefix_for(len(nodes), network)} or larger"
            )
    return problems


def _prefix_for(count: int, network) -> int:
    """The longest prefix whose network holds `count` usable addresses."""
    prefix = network.max_prefixlen
    while prefix > 0 and _usable_addresses(2 ** (network.max_prefixlen - prefix)) < count:
        prefix -= 1
    return prefix


def _check_benchmark_floors(cluster: Cluster) -> list[str]:
    """railforge_benchmark_hardware_class is a class of floors.yml, and railforge_benchmark_floors valid, by the
    benchmark's own loader (railforge.bench.floors)."""
    floors = railforge_module("railforge.bench.floors")
    names = ("railforge_benchmark_hardware_class", "railforge_benchmark_floors")
    if not any(name in cluster.hostvars.get(cluster.reference, {}) for name in names):
        return []
    if not all(cluster.usable(name) for name in names if cluster.value(name) is not None):
        return []
    overrides = cluster.value("railforge_benchmark_floors") or None
    hardware_class = cluster.value("railforge_benchmark_hardware_class") or "cpu-fallback"
    try:
        floors.load_floors(hardware_class, overrides)
    except floors.FloorsError as error:
        return [f"railforge_benchmark_hardware_class / railforge_benchmark_floors: {error}"]
    return []


CLUSTER_RULES = (
    _check_controller_variables,
    _check_accelerated_storage,
    _check_control_plane_endpoint,
    _check_existing_kubeconfig,
    _check_local_images,
    _check_network_overlaps,
    _check_rail_ranges,
    _check_benchmark_floors,
)
