"""The lab's inventory: the example inventory, cut to the hosts this machine runs, plus an overlay of what must
differ here. ``railforge lab inventory`` writes it (hosts.yml, scale.yml, group_vars/) beside the overlay, from
inventories/example and inventories/lab/overlay.yml; ``make lab`` runs it. Everything else the example says (its
groups, the GPU and RDMA settings, topology, rail ranges, cluster name, packages) reaches the lab unchanged, and
what an overlay may set is named here, with why, in one place: anything else is refused.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from railforge.cliargs import UsageError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories/example"
OVERLAY = ROOT / "inventories/lab/overlay.yml"
GENERATED_HEADER = "# Written by `railforge lab inventory` from {example} and {overlay}: edit those, not this.\n"
MACHINE_VARS = "# With the machine vars of "

# What the lab may set differently from the example, by why it must differ on this machine.
MAY_DIFFER: dict[str, frozenset[str]] = {
    # Node containers on this machine's network, with the lab's SSH key and known hosts; no proxy; the
    # kubeconfig fetched here.
    "connection and addresses": frozenset(
        {
            "ansible_host",
            "ansible_ssh_private_key_file",
            "ansible_ssh_common_args",
            "ansible_python_interpreter",
            "railforge_node_ip",
            "kubernetes_control_plane_endpoint",
            "common_http_proxy",
            "common_https_proxy",
            "common_no_proxy",
            "kubernetes_kubeconfig",
            "railforge_scheduler_kubeconfig",
            "mpi_operator_kubeconfig",
            "rail_networks_kubeconfig",
        }
    ),
    # No registry and no vendor download here: local signed repositories, image archives and the pinned releases'
    # manifests built from their Go modules.
    "stand-in repositories and image archives": frozenset(
        {
            "kubernetes_apt_repo_url",
            "kubernetes_apt_repo_key_url",
            "kubernetes_apt_repo_key_fingerprint",
            "kubernetes_containerd_apt_repo_url",
            "kubernetes_image_archives",
            "versions_railforge_scheduler_registry",
            "nvidia_driver_repo_base_url",
            "nvidia_driver_repo_key_fingerprint",
            "nvidia_container_toolkit_repo_url",
            "nvidia_container_toolkit_repo_key_url",
            "nvidia_container_toolkit_repo_key_fingerprint",
            "doca_ofed_version",
            "doca_ofed_base_url",
            "doca_ofed_repo_key_url",
            "doca_ofed_repo_key_fingerprint",
            "gpudirect_gdrcopy_repo_url",
            "gpudirect_gdrcopy_repo_key_url",
            "gpudirect_gdrcopy_repo_key_fingerprint",
            "mpi_operator_crd_url",
            "railforge_scheduler_podgroup_crd_url",
            "rail_networks_crd_files",
        }
    ),
    # Simulated device trees and veth rails: no GPU or HCA for NVIDIA's device plugin, the RDMA device plugin or
    # the GPU exporter, and no InfiniBand port for IPoIB.
    "simulated hardware": frozenset(
        {
            "railforge_hw_root",
            "nvidia_driver_hw_root",
            "nvidia_fabricmanager_hw_root",
            "doca_ofed_hw_root",
            "gpudirect_hw_root",
            "rail_networks_cni_types",
            "rail_networks_install_rdma_device_plugin",
            "nvidia_device_plugin_install_daemonset",
            "dcgm_exporter_install",
        }
    ),
    # Privileged containers on a cgroup v1 host whose disk is shared with its build caches.
    "node containers": frozenset(
        {
            "kubernetes_allow_cgroup_v1",
            "kubernetes_containerd_restrict_oom_score_adj",
            "kubernetes_ignore_preflight_errors",
            "kubernetes_kube_proxy_config",
            "kubernetes_kubelet_config",
        }
    ),
    # 2 cores: the node stage on every node at once, one scheduler replica.
    "scaled down": frozenset({"railforge_serial", "railforge_scheduler_replicas"}),
}
ALLOWED = frozenset().union(*MAY_DIFFER.values())


def _load(path: Path) -> dict[str, Any]:
    """A YAML file of one mapping (an empty file: none)."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise UsageError(f"{path}: cannot be read as YAML ({error})") from error
    return _mapping(data, str(path))


def _mapping(data: object, where: str) -> dict[str, Any]:
    """``data`` when it is a mapping (None: an empty one)."""
    if not isinstance(data, dict | None):
        raise UsageError(f"{where}: expected a mapping of names to values, got a {type(data).__name__}")
    return data or {}


def _refuse_unlisted(variables: Mapping[str, Any], where: str) -> None:
    if unlisted := sorted(set(variables) - ALLOWED):
        raise UsageError(
            f"{where}: {', '.join(unlisted)} {'is' if len(unlisted) == 1 else 'are'} not something the lab may change "
            f"from the example (it may change: {'; '.join(MAY_DIFFER)})"
        )


def _groups(tree: Mapping[str, Any], where: object = "hosts.yml") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every group of a YAML inventory's tree (the file ``where``), by name, as often as the tree names it."""
    for name, group in tree.items():
        group = _mapping(group, f"{where}: group {name}")
        yield name, group
        yield from _groups(_mapping(group.get("children"), f"{where}: group {name}: children"), where)


def _example_hosts(tree: Mapping[str, Any], where: Path) -> dict[str, dict[str, Any]]:
    hosts: dict[str, dict[str, Any]] = {}
    for name, group in _groups(tree, where):
        for host, variables in _mapping(group.get("hosts"), f"{where}: group {name}: hosts").items():
            hosts.setdefault(host, {}).update(_mapping(variables, f"{where}: host {host}"))
    return hosts


def _cut(tree: Mapping[str, Any], keep: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The tree with only the hosts in keep, each with its overlay's variables over the example's."""
    cut = copy.deepcopy(dict(tree))
    placed: set[str] = set()  # where the example first names a host, its overlay variables go
    for _, group in _groups(cut):
        if group.get("hosts") is None:
            continue
        kept = {host: variables for host, variables in group["hosts"].items() if host in keep}
        for host, variables in kept.items():
            if host not in placed:
                kept[host] = {**(variables or {}), **keep[host]} or None
                placed.add(host)
        group["hosts"] = kept
    return cut


def _group_vars(example: Path) -> dict[str, dict[str, Any]]:
    """The example's group_vars, a merged mapping per group (files of a group's directory in name order)."""
    merged: dict[str, dict[str, Any]] = {}
    if not (example / "group_vars").is_dir():
        raise UsageError(f"{example}: expected an inventory with a group_vars directory")
    for path in sorted((example / "group_vars").iterdir()):
        files = sorted(path.glob("*.yml")) if path.is_dir() else [path]
        group = path.stem if path.is_file() else path.name
        for file in files:
            merged.setdefault(group, {}).update(_load(file))
    return merged


def _hosts_section(overlay: Mapping[str, Any], key: str, example_hosts: Iterable[str], where: Path) -> dict:
    hosts = overlay.get(key) or {}
    if not isinstance(hosts, dict):
        raise UsageError(f"{where}: {key} must map host names of the example to their variables")
    for host, variables in hosts.items():
        if host not in example_hosts:
            raise UsageError(f"{where}: {key}: {host} is not a host of the example inventory")
        _refuse_unlisted(_mapping(variables, f"{where}: {key}: {host}"), f"{where}: {key}: {host}")
    return {host: dict(variables or {}) for host, variables in hosts.items()}


def generate(
    out: Path, *, example: Path = EXAMPLE, overlay_path: Path = OVERLAY, machine_vars: Path | None = None
) -> list[Path]:
    """Write hosts.yml, scale.yml and group_vars/ into out; return the files written."""
    overlay = _load(overlay_path)
    tree = _load(example / "hosts.yml")
    known = _example_hosts(tree, example / "hosts.yml")
    hosts = _hosts_section(overlay, "hosts", known, overlay_path)
    scale = _hosts_section(overlay, "scale_hosts", known, overlay_path)
    if not hosts:
        raise UsageError(f"{overlay_path}: hosts names no host of the example to run")
    if both := sorted(set(hosts) & set(scale)):
        raise UsageError(f"{overlay_path}: {', '.join(both)} in both hosts and scale_hosts")
    variables = dict(overlay.get("vars") or {})
    _refuse_unlisted(variables, f"{overlay_path}: vars")
    _refuse_dropping_machine_vars(out, machine_vars)
    if machine_vars is not None:
        machine = _load(machine_vars)
        _refuse_unlisted(machine, str(machine_vars))
        variables.update(machine)
    group_vars = _group_vars(example)
    for group, values in group_vars.items():
        if group != "all" and (shadowed := sorted(set(values) & set(variables))):
            raise UsageError(
                f"{overlay_path}: the example's group {group} sets {', '.join(shadowed)}, which outranks the "
                "overlay's value for all hosts: set it per host under hosts"
            )
    group_vars["all"] = {**group_vars.get("all", {}), **variables}
    header = GENERATED_HEADER.format(example=_shown(example), overlay=_shown(overlay_path))
    written = {
        out / "hosts.yml": _cut(tree, hosts),
        out / "scale.yml": _cut(tree, scale),
        **{out / "group_vars" / f"{group}.yml": values for group, values in group_vars.items()},
    }
    (out / "group_vars").mkdir(parents=True, exist_ok=True)
    for stale in set((out / "group_vars").glob("*.yml")) - set(written):
        stale.unlink()
    all_header = header + ("" if machine_vars is None else f"{MACHINE_VARS}{machine_vars}\n")
    for path, data in written.items():
        first = all_header if path.name == "all.yml" else header
        path.write_text(first + "---\n" + yaml.safe_dump(data, sort_keys=False, width=120))
    return sorted(written)


def _refuse_dropping_machine_vars(out: Path, machine_vars: Path | None) -> None:
    """An inventory written with machine vars (`lab.sh up` writes one) is not rewritten without them: the running
    lab's keys and archives would be lost from it."""
    if machine_vars is not None:
        return
    try:
        lines = (out / "group_vars" / "all.yml").read_text().splitlines()[:2]
    except OSError:
        return
    for line in lines:
        if line.startswith(MACHINE_VARS):
            used = line.removeprefix(MACHINE_VARS)
            raise UsageError(
                f"{out / 'group_vars' / 'all.yml'} holds the machine vars of {used}: "
                f"pass --machine-vars {used} to keep them"
            )


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
