"""The kubernetes role's checks and filters: malformed input stops the run before any change, naming the variable;
the join command, the pods' MTU and image archive names are read as kubeadm, the API and the archives write them."""

import importlib.util
import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location(
    "kubernetes_filters", ROOT / "roles/kubernetes/filter_plugins/kubernetes.py"
)
filters = importlib.util.module_from_spec(spec)
spec.loader.exec_module(filters)

INVENTORY = """
all:
  vars: {{ansible_connection: local, ansible_python_interpreter: "{{{{ ansible_playbook_python }}}}"}}
  children:
    kube_control_plane:
      hosts:
{control_planes}
    kube_node:
      hosts:
        worker-1: {{railforge_node_ip: 192.0.2.21}}
"""


def inventory(tmp_path, control_planes=("cp-1",)):
    hosts = "\n".join(
        f"        {name}: {{railforge_node_ip: 192.0.2.{11 + i}}}" for i, name in enumerate(control_planes)
    )
    path = tmp_path / "hosts.yml"
    path.write_text(INVENTORY.format(control_planes=hosts))
    return str(path)


CASES = {
    "unknown mode": ({"kubernetes_mode": "kubespray"}, "value of kubernetes_mode must be one of: kubeadm, existing"),
    "overlapping networks": (
        {"kubernetes_pod_subnet": "10.96.0.0/16"},
        "- kubernetes_pod_subnet 10.96.0.0/16 and kubernetes_service_subnet 10.96.0.0/12 overlap",
    ),
    "pod network too small": (
        {"kubernetes_pod_subnet": "10.244.0.0/24"},
        "- kubernetes_pod_subnet must be a network address of at least 4 node ranges (/24 each: /22 or larger)",
    ),
    "cluster domain that is no DNS name": (
        {"kubernetes_dns_domain": "Cluster.Local"},
        "- kubernetes_dns_domain must be a DNS name like railforge.io, got 'Cluster.Local'",
    ),
    "not a network": (
        {"kubernetes_service_subnet": "10.96.0.1/33"},
        "- kubernetes_service_subnet must be a network address with prefix and no host bits",
    ),
    "node inside the pod network": (
        {"kubernetes_pod_subnet": "192.0.0.0/16"},
        "kubernetes_node_ip of cp-1 (192.0.2.11) lies inside kubernetes_pod_subnet 192.0.0.0/16",
    ),
    "bad token lifetime": (
        {"kubernetes_join_token_ttl": "forever"},
        "- kubernetes_join_token_ttl must be a duration like 15m, got 'forever'",
    ),
    "unknown CNI": ({"kubernetes_cni": "bridge"}, "value of kubernetes_cni must be one of: flannel, none"),
    "unknown flannel backend": (
        {"kubernetes_flannel_backend": "udp"},
        "value of kubernetes_flannel_backend must be one of: vxlan, host-gw",
    ),
    "flannel interface with a space": (
        {"kubernetes_flannel_iface": "eth 0"},
        "- kubernetes_flannel_iface must be an interface name (at most 15 characters), got 'eth 0'",
    ),
    "flannel image without a tag": (
        {"kubernetes_flannel_image": "ghcr.io/flannel-io/flannel"},
        "- kubernetes_flannel_image must be an image REGISTRY/NAME:TAG, got 'ghcr.io/flannel-io/flannel'",
    ),
    "mirror not a list": (
        {"kubernetes_registry_mirrors": {"registry.k8s.io": "https://mirror.example"}},
        "- kubernetes_registry_mirrors must be registry hosts mapped to lists of http(s) mirror URLs",
    ),
    "relative archive": (
        {"kubernetes_image_archives": ["images/pause.tar"]},
        "- kubernetes_image_archives[0] must be an absolute path, got 'images/pause.tar'",
    ),
    "repository over ftp": (
        {"kubernetes_apt_repo_url": "ftp://mirror.example/k8s"},
        "- kubernetes_apt_repo_url must be a http/https/file URL",
    ),
}


@pytest.mark.parametrize(("variables", "message"), CASES.values(), ids=CASES.keys())
def test_malformed_input_fails_first(run_role, tmp_path, variables, message):
    result = run_role("kubernetes", variables, inventory=inventory(tmp_path))
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert message in output
    if message.startswith("- "):  # a line of the one message of railforge_role_input
        assert "Invalid input for role kubernetes (nothing was changed):\n" in output
    assert "changed=0" in output
    assert "Add the Kubernetes package repository" not in output  # stopped before the first change


def test_node_addresses_inside_the_networks_are_all_named_at_once():
    problems = filters.kubernetes_network_problems(
        "10.0.0.0/8", "10.96.0.0/12", {"a": "10.1.2.3", "b": "192.0.2.1", "c": "not-an-ip"}
    )
    assert problems == [
        "kubernetes_node_ip of a (10.1.2.3) lies inside kubernetes_pod_subnet 10.0.0.0/8",
        "kubernetes_node_ip of c: expected an IPv4 address, got 'not-an-ip'",
    ]
    assert filters.kubernetes_network_problems("10.244.0.0/16", "10.96.0.0/12", {"a": "10.1.2.3"}) == []


def test_join_command_parts():
    printed = (
        "kubeadm join 10.89.50.11:6443 --token abcdef.0123456789abcdef \\\n"
        "\t--discovery-token-ca-cert-hash sha256:" + "ab" * 32 + " \n"
    )
    assert filters.kubernetes_join_parts(printed) == {
        "endpoint": "10.89.50.11:6443",
        "token": "abcdef.0123456789abcdef",
        "ca_cert_hash": "sha256:" + "ab" * 32,
    }
    with pytest.raises(AnsibleFilterError, match="no join command"):
        filters.kubernetes_join_parts("error: timed out")


# ansible_facts of a node (gather_subset network), trimmed: eth0 with a secondary address, a jumbo-frame rail.
NETWORK_FACTS = {
    "interfaces": ["lo", "eth0", "rail-0"],
    "lo": {"mtu": 65536, "ipv4": {"address": "127.0.0.1"}},
    "eth0": {"mtu": 1500, "ipv4": {"address": "10.89.50.21"}, "ipv4_secondaries": [{"address": "10.89.50.10"}]},
    "rail_0": {"mtu": 9000, "ipv4": {"address": "10.89.51.21"}},
}


def test_pod_mtu_is_the_flannel_interfaces_less_vxlans_overhead():
    assert filters.kubernetes_pod_mtu(NETWORK_FACTS, "10.89.50.21", "vxlan") == 1450
    assert filters.kubernetes_pod_mtu(NETWORK_FACTS, "10.89.50.10", "host-gw") == 1500  # a secondary address
    assert filters.kubernetes_pod_mtu(NETWORK_FACTS, "rail-0", "vxlan") == 8950  # by name; facts say rail_0
    with pytest.raises(AnsibleFilterError, match=r"kubernetes_flannel_iface .* got '192.0.2.9'"):
        filters.kubernetes_pod_mtu(NETWORK_FACTS, "192.0.2.9", "vxlan")


def test_archive_names_from_docker_and_oci_metadata():
    docker = json.dumps([{"Config": "x.json", "RepoTags": ["registry.k8s.io/pause:3.10.2"], "Layers": []}])
    oci = json.dumps(
        {
            "schemaVersion": 2,
            "manifests": [{"annotations": {"org.opencontainers.image.ref.name": "localhost/railforge-openmpi:0.1.0"}}],
        }
    )
    assert filters.kubernetes_archive_refs(docker + "\n") == ["registry.k8s.io/pause:3.10.2"]
    assert filters.kubernetes_archive_refs(oci) == ["localhost/railforge-openmpi:0.1.0"]
    assert filters.kubernetes_archive_refs(docker + oci) == [
        "registry.k8s.io/pause:3.10.2",
        "localhost/railforge-openmpi:0.1.0",
    ]
    with pytest.raises(AnsibleFilterError, match="names no image"):
        filters.kubernetes_archive_refs(json.dumps([{"RepoTags": None}]))


def test_workers_leave_out_archives_of_control_plane_images_only():
    only = filters.kubernetes_control_plane_only
    assert only(["registry.k8s.io/kube-apiserver:v1.36.5", "registry.k8s.io/etcd:3.6.6-0"])
    assert only(["mirror.example:5000/k8s/kube-scheduler@sha256:" + "0" * 64])
    assert not only(["registry.k8s.io/kube-apiserver:v1.36.5", "registry.k8s.io/kube-proxy:v1.36.5"])
    assert not only(["localhost/railforge-scheduler:0.1.0"])  # the Railforge scheduler: any node may run it
    assert not only(["registry.k8s.io/etcd-backup:1.0"])


def test_selection_problems_are_all_named_at_once():
    cluster = ["cp-1", "cp-2", "w-1"]
    assert filters.kubernetes_selection_problems(["cp-2", "w-1"], "v", cluster, "cp-1") == []
    assert filters.kubernetes_selection_problems(["cp-1", "x"], "v", cluster, "cp-1") == [
        "v: x is not a host of k8s_cluster",
        "v: cp-1 is the first control plane, which this run leaves alone",
    ]
    assert filters.kubernetes_selection_problems(["cp-1"], "v", cluster, "cp-1", first_allowed=True) == []
    assert filters.kubernetes_selection_problems([], "v", cluster, "cp-1") == [
        """v: name the hosts, e.g. -e '{"v": ["host1", "host2"]}'; got none"""
    ]
    assert filters.kubernetes_selection_problems("w-1", "v", cluster, "cp-1") == [
        "v: expected a list of inventory host names, got 'w-1'"
    ]


def test_reset_problems_keep_lost_hosts_apart_from_reset_ones_and_a_control_plane_in_the_cluster():
    cluster, planes = ["cp-1", "cp-2", "cp-3", "w-1"], ["cp-1", "cp-2", "cp-3"]
    assert filters.kubernetes_reset_problems(["cp-2"], ["cp-3", "w-1"], cluster, planes) == []
    assert filters.kubernetes_reset_problems([], ["w-1"], cluster, planes) == []
    assert filters.kubernetes_reset_problems([], [], cluster, planes) == [
        "kubernetes_reset_hosts, kubernetes_reset_lost_hosts: name the hosts to take out, e.g. -e "
        """'{"kubernetes_reset_hosts": ["host1"]}' (or, for hosts that are gone, """
        "kubernetes_reset_lost_hosts); got none"
    ]
    assert filters.kubernetes_reset_problems(["w-1"], ["w-1", "cp-1", "x"], cluster, planes) == [
        "kubernetes_reset_lost_hosts: x is not a host of k8s_cluster",
        "kubernetes_reset_lost_hosts: cp-1 is the first control plane, which this run leaves alone",
    ]
    assert filters.kubernetes_reset_problems(["w-1"], ["w-1"], cluster, planes) == [
        "kubernetes_reset_lost_hosts: w-1 is also in kubernetes_reset_hosts, which reaches it to reset it; name it in "
        "one of them"
    ]
    # the first control plane reset on purpose and the others lost: none would stay to remove them through
    assert filters.kubernetes_reset_problems(["cp-1"], ["cp-2", "cp-3"], cluster, planes, first_allowed=True) == [
        "kubernetes_reset_lost_hosts: no control plane stays to remove them from the cluster"
    ]


def test_version_moves_name_the_kubeadm_packages_installed_at_another_version():
    pinned = ["kubelet=1.36.5-1.1", "kubeadm=1.36.5-1.1", "kubectl=1.36.5-1.1", "containerd.io=2.3.7-1"]
    installed = {
        "kubelet": [{"version": "1.36.4-1.1"}],
        "kubeadm": [{"version": "1.36.5-1.1"}],
        "containerd.io": [{"version": "2.3.6-1"}],  # not kubeadm's to move: the role installs it as pinned
    }
    assert filters.kubernetes_version_moves(pinned, installed) == ["kubelet 1.36.4-1.1 -> 1.36.5-1.1"]
    assert filters.kubernetes_version_moves(pinned, {}) == []  # a new node


def test_upgrade_problems_refuse_what_kubeadm_would_not_upgrade():
    joined = {"cp-1": {"kubeadm": "1.36.4-1.1", "kubelet": "1.36.4-1.1", "kubectl": "1.36.4-1.1"}}
    problems = filters.kubernetes_upgrade_problems
    assert problems("1.36.5", "v1.36.4", joined) == []  # the next patch release
    assert problems("1.37.0", "v1.36.4", joined) == []  # the next minor release
    assert problems("1.36.4", "v1.36.4", joined) == []  # at it already: nothing to do, nothing refused
    assert problems("1.38.0", "v1.36.4", joined) == [
        "kubernetes_version 1.38.0 skips a minor release from the cluster's v1.36.4: upgrade to 1.37 first (kubeadm "
        "moves one minor release at a time)"
    ]
    assert problems("2.0.0", "v1.36.4", joined)[0].startswith("kubernetes_version 2.0.0 skips a minor release")
    assert problems("1.36.3", "v1.36.4", joined) == [
        "kubernetes_version 1.36.3 is older than the cluster's v1.36.4: kubeadm does not downgrade"
    ]
    assert problems("1.36", "v1.36.4", joined) == ["kubernetes_version: expected a release such as 1.36.5, got '1.36'"]
    assert problems("1.36.5", "", joined) == [
        "the cluster's API server reports '', not a release kubeadm can upgrade from"
    ]
    # a node ahead of the target, and one that never joined (no kubelet)
    nodes = {**joined, "w-1": {"kubeadm": "", "kubelet": "", "kubectl": ""}, "w-2": {"kubelet": "1.36.6-1.1"}}
    assert problems("1.36.5", "v1.36.4", nodes) == [
        "w-1 has no kubelet: not part of the cluster (join it with playbooks/scale.yml)",
        "w-2 has kubelet 1.36.6-1.1, newer than kubernetes_version 1.36.5",
    ]
