"""Filters of the kubernetes role: network checks, the join command's parts, the pods' MTU, the image archives' names,
the hosts scale.yml and reset.yml are asked to work on."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re

from ansible.errors import AnsibleFilterError

JOIN_COMMAND = re.compile(
    r"kubeadm join (\S+)[\s\\]+--token (\S+)[\s\\]+--discovery-token-ca-cert-hash (sha256:[0-9a-f]{64})"
)
VXLAN_OVERHEAD = 50  # outer IPv4, UDP and VXLAN headers and the inner Ethernet header
REF_NAME = "org.opencontainers.image.ref.name"  # an OCI archive's image name annotation
# kubeadm's static pods: only control planes run these images
CONTROL_PLANE_IMAGES = frozenset({"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"})


def kubernetes_network_problems(pod_subnet, service_subnet, node_ips) -> list[str]:
    """The nodes' addresses (from their facts where the inventory sets none) that are no IPv4 address or lie inside
    the pod or service network, one line per problem naming the variable; [] when all is well. The networks' own
    rules (format, size, overlap) are the pre-flight's."""
    networks = {}
    for name, value in (("kubernetes_pod_subnet", pod_subnet), ("kubernetes_service_subnet", service_subnet)):
        with contextlib.suppress(ValueError):  # refused by the pre-flight and the role's input check
            networks[name] = ipaddress.IPv4Network(str(value))
    problems = []
    for host, address in sorted(node_ips.items()):
        try:
            ip = ipaddress.IPv4Address(str(address))
        except ValueError:
            problems.append(f"kubernetes_node_ip of {host}: expected an IPv4 address, got {address!r}")
            continue
        for name, network in networks.items():
            if ip in network:
                problems.append(f"kubernetes_node_ip of {host} ({ip}) lies inside {name} {network}")
    return problems


def kubernetes_join_parts(command: str) -> dict[str, str]:
    """The endpoint, token and CA hash of `kubeadm token create --print-join-command`'s output."""
    match = JOIN_COMMAND.search(str(command))
    if not match:
        raise AnsibleFilterError("kubeadm printed no join command with an endpoint, a token and a CA hash")
    return {"endpoint": match.group(1), "token": match.group(2), "ca_cert_hash": match.group(3)}


def _ipv4_addresses(facts: dict, device: str) -> list[str]:
    details = facts.get(device.replace("-", "_"), {})
    return [entry.get("address") for entry in [details.get("ipv4", {}), *details.get("ipv4_secondaries", [])]]


def kubernetes_pod_mtu(facts: dict, interface: str, backend: str) -> int:
    """The MTU of a node's pods: that of the interface (a name, or an IPv4 address it holds) flannel sends their
    traffic through, less the VXLAN encapsulation with the vxlan backend; from the host's network facts."""
    devices = facts.get("interfaces", [])
    name = str(interface) if str(interface) in devices else None
    name = name or next((device for device in devices if str(interface) in _ipv4_addresses(facts, device)), None)
    if name is None:
        raise AnsibleFilterError(
            f"kubernetes_flannel_iface (or, when empty, kubernetes_node_ip): expected an interface of this host or "
            f"one of its IPv4 addresses, got {interface!r}"
        )
    mtu = int(facts[name.replace("-", "_")]["mtu"])
    return mtu - VXLAN_OVERHEAD if backend == "vxlan" else mtu


def kubernetes_archive_refs(metadata: str) -> list[str]:
    """The image names an archive holds, from its manifest.json (docker archive: RepoTags) and/or index.json (OCI
    archive: the ref.name annotation), as tar prints them one after the other."""
    decoder, refs, position, text = json.JSONDecoder(), [], 0, str(metadata).strip()
    while position < len(text):
        document, end = decoder.raw_decode(text, position)
        position = end + len(text[end:]) - len(text[end:].lstrip())
        if isinstance(document, list):
            refs += [tag for image in document for tag in image.get("RepoTags") or []]
        else:
            annotations = (manifest.get("annotations", {}) for manifest in document.get("manifests", []))
            refs += [
                a["org.opencontainers.image.ref.name"] for a in annotations if "org.opencontainers.image.ref.name" in a
            ]
    if not refs:
        raise AnsibleFilterError("the image archive names no image (no RepoTags, no ref.name annotation)")
    return refs


def kubernetes_control_plane_only(refs: list[str]) -> bool:
    """Whether every image named (``registry/path/name:tag`` or ``...@digest``) is one that only control planes run:
    a worker leaves such an archive alone."""
    names = (ref.split("@")[0].rsplit("/", 1)[-1].split(":")[0] for ref in refs)
    return all(name in CONTROL_PLANE_IMAGES for name in names)


def kubernetes_selection_problems(
    chosen, variable: str, cluster_hosts: list[str], first_control_plane: str, first_allowed: bool = False
) -> list[str]:
    """What is wrong with the hosts a scale or reset run was asked to work on, one line each; [] when all is well.
    The first control plane holds the cluster's only kubeadm configuration and admin credentials: it is refused
    unless `first_allowed`."""
    if not isinstance(chosen, list):
        return [f"{variable}: expected a list of inventory host names, got {chosen!r}"]
    if not chosen:
        return [f'{variable}: name the hosts, e.g. -e \'{{"{variable}": ["host1", "host2"]}}\'; got none']
    problems = [f"{variable}: {name} is not a host of k8s_cluster" for name in chosen if name not in cluster_hosts]
    if first_control_plane in chosen and not first_allowed:
        problems.append(f"{variable}: {first_control_plane} is the first control plane, which this run leaves alone")
    return problems


def kubernetes_reset_problems(
    reset, lost, cluster_hosts: list[str], control_planes: list[str], first_allowed: bool = False
) -> list[str]:
    """What is wrong with the hosts a reset run was asked to take out, one line each; [] when all is well. `reset`
    are drained, reset and cleared; `lost` are gone for good (no SSH) and only removed from the cluster, through a
    control plane that stays: never the first control plane, never a host of both lists."""
    first = control_planes[0] if control_planes else ""
    if reset == [] and lost == []:
        return [
            "kubernetes_reset_hosts, kubernetes_reset_lost_hosts: name the hosts to take out, e.g. -e "
            '\'{"kubernetes_reset_hosts": ["host1"]}\' (or, for hosts that are gone, kubernetes_reset_lost_hosts); '
            "got none"
        ]
    problems = (
        []
        if reset == []
        else kubernetes_selection_problems(reset, "kubernetes_reset_hosts", cluster_hosts, first, first_allowed)
    )
    if lost != []:
        problems += kubernetes_selection_problems(lost, "kubernetes_reset_lost_hosts", cluster_hosts, first)
    if problems:
        return problems
    problems += [
        f"kubernetes_reset_lost_hosts: {name} is also in kubernetes_reset_hosts, which reaches it to reset it; name "
        "it in one of them"
        for name in lost
        if name in reset
    ]
    if lost and not [host for host in control_planes if host not in reset and host not in lost]:
        problems.append("kubernetes_reset_lost_hosts: no control plane stays to remove them from the cluster")
    return problems


# What kubeadm upgrades, node by node: a newer kubelet than the API server breaks the version skew policy.
KUBEADM_PACKAGES = ("kubeadm", "kubelet", "kubectl")


def kubernetes_version_moves(pinned: list[str], installed: dict) -> list[str]:
    """The kubeadm, kubelet and kubectl of `pinned` ("name=version" apt specs) that `installed` (package_facts'
    ansible_facts.packages) holds at another version, as "NAME INSTALLED -> PINNED"; [] when none is installed or all
    match."""
    moves = []
    for spec in pinned:
        name, _, version = spec.partition("=")
        found = sorted({entry["version"] for entry in installed.get(name, [])})
        if name in KUBEADM_PACKAGES and found and found != [version]:
            moves.append(f"{name} {', '.join(found)} -> {version}")
    return moves


def _release(version: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of "1.36.5", "v1.36.5" or a package version "1.36.5-1.1"; None for anything else."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.+~]+)?", str(version))
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def kubernetes_upgrade_problems(target: str, cluster: str, installed: dict) -> list[str]:
    """Why playbooks/upgrade.yml must not move a cluster running `cluster` (the API server's version) whose nodes
    hold `installed` ({host: {package: version}}) to `target`: kubeadm upgrades one minor release at a time and never
    down; [] when it may."""
    wanted, running = _release(target), _release(cluster)
    if wanted is None:
        return [f"kubernetes_version: expected a release such as 1.36.5, got {target!r}"]
    if running is None:
        return [f"the cluster's API server reports {cluster!r}, not a release kubeadm can upgrade from"]
    problems = []
    if wanted < running:
        problems.append(
            f"kubernetes_version {target} is older than the cluster's {cluster}: kubeadm does not downgrade"
        )
    elif wanted[0] != running[0] or wanted[1] > running[1] + 1:
        problems.append(
            f"kubernetes_version {target} skips a minor release from the cluster's {cluster}: upgrade to "
            f"{running[0]}.{running[1] + 1} first (kubeadm moves one minor release at a time)"
        )
    for host, packages in sorted(installed.items()):
        if not packages.get("kubelet"):
            problems.append(f"{host} has no kubelet: not part of the cluster (join it with playbooks/scale.yml)")
        for name, version in sorted(packages.items()):
            release = _release(version)
            if name in KUBEADM_PACKAGES and release is not None and running <= wanted < release:
                problems.append(f"{host} has {name} {version}, newer than kubernetes_version {target}")
    return problems


class FilterModule:
    def filters(self):
        return {
            "kubernetes_network_problems": kubernetes_network_problems,
            "kubernetes_join_parts": kubernetes_join_parts,
            "kubernetes_pod_mtu": kubernetes_pod_mtu,
            "kubernetes_archive_refs": kubernetes_archive_refs,
            "kubernetes_control_plane_only": kubernetes_control_plane_only,
            "kubernetes_selection_problems": kubernetes_selection_problems,
            "kubernetes_reset_problems": kubernetes_reset_problems,
            "kubernetes_version_moves": kubernetes_version_moves,
            "kubernetes_upgrade_problems": kubernetes_upgrade_problems,
        }
