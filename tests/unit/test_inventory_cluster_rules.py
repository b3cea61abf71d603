"""The pre-flight's rules between hosts and between stages (plugins/module_utils/railforge_inventory.py): each
realistic admin mistake below passed the check before and failed a stage after the nodes were changed; each must
now be refused with a message naming the variable, where it is set and what was expected. inventories/example
must pass them all (test_inventory_check.py runs the pre-flight on it)."""

import importlib.util
import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GROUPS = {
    "kube_control_plane": ["cp-01", "cp-02", "cp-03"],
    "gpu_nodes": ["gpu-01", "gpu-02"],
    "rdma_nodes": ["gpu-01", "gpu-02"],
    "nvswitch_nodes": ["gpu-01", "gpu-02"],
    "storage_nodes": ["stor-01"],
}
GROUPS["kube_node"] = GROUPS["gpu_nodes"]
GROUPS["k8s_cluster"] = GROUPS["kube_control_plane"] + GROUPS["kube_node"]
GROUPS["all"] = GROUPS["k8s_cluster"] + GROUPS["storage_nodes"]
ADDRESSES = {"cp-01": "10.10.0.11", "cp-02": "10.10.0.12", "cp-03": "10.10.0.13", "gpu-01": "10.10.1.1"}
ADDRESSES |= {"gpu-02": "10.10.1.2", "stor-01": "10.10.2.1"}
ALL = {
    "railforge_cluster_name": "forge",
    "kubernetes_control_plane_endpoint": "k8s-api.forge.example.internal:6443",
    "rail_networks_cidrs": ["10.200.0.0/24", "10.201.0.0/24"],
    "versions_railforge_scheduler_registry": "registry.forge.example.internal/railforge",
}
GROUP_VARS = {
    "gpu_nodes": {"railforge_gpu_count": 8},
    "rdma_nodes": {
        "railforge_rdma_link_layer": "infiniband",
        "railforge_rdma_hcas": ["mlx5_0", "mlx5_3"],
        "gpudirect_gdrcopy_source": "apt",
    },
}


def load_checks():
    spec = importlib.util.spec_from_file_location(
        "railforge_inventory", ROOT / "plugins/module_utils/railforge_inventory.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECKS = load_checks()
SPECS = {
    name: spec
    for path in sorted(ROOT.glob("roles/*/meta/argument_specs.yml"))
    for name, spec in yaml.safe_load(path.read_text())["argument_specs"]["main"]["options"].items()
}


def problems_of(all_vars=None, group_vars=None, host_vars=None, groups=None) -> list[str]:
    """validate() on the inventory above changed by the given variables, merged as Ansible does (all < group <
    host)."""
    groups = groups or GROUPS
    layers = {**GROUP_VARS, **(group_vars or {})}
    hostvars = {}
    for host in groups["all"]:
        variables = {"ansible_host": ADDRESSES[host], **ALL, **(all_vars or {})}
        for group in sorted(layers):
            if host in groups.get(group, []):
                variables.update(layers[group])
        hostvars[host] = {**variables, **(host_vars or {}).get(host, {})}
    localhost = {**ALL, **(all_vars or {})}  # the machine running Ansible reads group all alone
    return CHECKS.validate(groups, hostvars, SPECS, localhost)


def test_the_base_inventory_is_sound():
    assert problems_of() == []


CASES = {
    "pod network overlaps the service network": (
        {"all_vars": {"kubernetes_pod_subnet": "10.96.0.0/16"}},
        "kubernetes_pod_subnet 10.96.0.0/16 and kubernetes_service_subnet 10.96.0.0/12 overlap: expected separate "
        "ranges (set in group all)",
    ),
    "node address inside the pod network": (
        {"all_vars": {"kubernetes_pod_subnet": "10.10.0.0/16"}},
        "ansible_host of cp-01 (10.10.0.11), cp-02 (10.10.0.12), cp-03 (10.10.0.13), gpu-01 (10.10.1.1), "
        "gpu-02 (10.10.1.2) (+1 more) lies inside kubernetes_pod_subnet 10.10.0.0/16",
    ),
    "node address inside a rail network": (
        {"host_vars": {"gpu-02": {"railforge_node_ip": "10.200.0.7"}}},
        "railforge_node_ip of gpu-02 (10.200.0.7) lies inside rail_networks_cidrs[0] 10.200.0.0/24",
    ),
    "rail network inside the service network": (
        {"all_vars": {"rail_networks_cidrs": ["10.100.0.0/24", "10.101.0.0/24"]}},
        "kubernetes_service_subnet 10.96.0.0/12 (set in its default) overlaps rail_networks_cidrs[0] 10.100.0.0/24",
    ),
    "rail networks overlap each other": (
        {"all_vars": {"rail_networks_cidrs": ["10.200.0.0/16", "10.200.1.0/24"]}},
        "rail_networks_cidrs[0] 10.200.0.0/16 (set in group all) overlaps rail_networks_cidrs[1] 10.200.1.0/24",
    ),
    "SR-IOV pool overlaps a rail network": (
        {"all_vars": {"sriov_network_cidrs": ["10.201.0.0/25"]}},
        "rail_networks_cidrs[1] 10.201.0.0/24 (set in group all) overlaps sriov_network_cidrs[0] 10.201.0.0/25",
    ),
    "fewer rail networks than rails": (
        {"all_vars": {"rail_networks_cidrs": ["10.200.0.0/24"]}},
        "rail_networks_cidrs (set in group all) lists 1 networks: expected one per rail, 2",
    ),
    "no rail networks for an RDMA cluster": (
        {"all_vars": {"rail_networks_cidrs": []}},
        "rail_networks_cidrs (set in group all) lists 0 networks: expected one per rail, 2",
    ),
    "three control planes without an endpoint": (
        {"all_vars": {"kubernetes_control_plane_endpoint": ""}},
        "kubernetes_control_plane_endpoint is required with 3 hosts in kube_control_plane (set in group all): "
        "expected the HOST:PORT of a load balancer",
    ),
    "endpoint without a port": (
        {"all_vars": {"kubernetes_control_plane_endpoint": "k8s-api.example.internal"}},
        "kubernetes_control_plane_endpoint must be HOST:PORT",
    ),
    "existing mode without its kubeconfig": (
        {"all_vars": {"kubernetes_mode": "existing", "kubernetes_kubeconfig": "/nonexistent/admin.conf"}},
        "kubernetes_kubeconfig (set in group all) is not there: kubernetes_mode existing expects the kubeconfig",
    ),
    "kubernetes version with a v": (
        {"all_vars": {"kubernetes_version": "v1.36.5"}},
        "kubernetes_version must be MAJOR.MINOR.PATCH without a leading v, got 'v1.36.5'",
    ),
    "kubernetes version the pinned repository does not serve": (
        {"all_vars": {"kubernetes_version": "1.35.2"}},
        "kubernetes_version 1.35.2 is not served by kubernetes_apt_repo_url https://pkgs.k8s.io/core:/stable:/v1.36/deb/",
    ),
    "Kubernetes' gang API on a version that serves another": (
        {
            "all_vars": {
                "kubernetes_gang_scheduling_api": True,
                "kubernetes_version": "1.35.2",
                "kubernetes_apt_repo_url": "https://pkgs.k8s.io/core:/stable:/v1.35/deb/",
            }
        },
        "kubernetes_gang_scheduling_api is true but kubernetes_version is 1.35.2: expected 1.36.x",
    ),
    "Kubernetes' gang API on a cluster Railforge does not make": (
        {
            "all_vars": {
                "kubernetes_gang_scheduling_api": True,
                "kubernetes_mode": "existing",
                "kubernetes_kubeconfig": str(ROOT / "inventories/lab/overlay.yml"),  # any file that is there
            }
        },
        "kubernetes_gang_scheduling_api is true but kubernetes_mode is existing",
    ),
    "scheduler settings the scheduler refuses": (
        {"all_vars": {"railforge_scheduler_settings": {"bind_workers": 0}}},
        "railforge_scheduler_settings must be settings the scheduler accepts (docs/scheduler.md): bind_workers is 0",
    ),
    "scheduler settings with an unknown key": (
        {"all_vars": {"railforge_scheduler_settings": {"resync_second": 5}}},
        "railforge_scheduler_settings must be settings the scheduler accepts (docs/scheduler.md):",
    ),
    "no scheduler replica": (
        {"all_vars": {"railforge_scheduler_replicas": 0}},
        "railforge_scheduler_replicas must be between 1 and 16, got 0",
    ),
    "MPI operator image without a tag": (
        {"all_vars": {"mpi_operator_image": "mpioperator/mpi-operator"}},
        "mpi_operator_image must be an image REGISTRY/NAME:TAG",
    ),
    "no device plugin replica": (
        {"all_vars": {"nvidia_device_plugin_time_slicing_replicas": 0}},
        "nvidia_device_plugin_time_slicing_replicas must be between 1 and 1024, got 0",
    ),
    "time-slicing with MIG mixed": (
        {
            "all_vars": {
                "nvidia_device_plugin_time_slicing_replicas": 4,
                "nvidia_device_plugin_mig_strategy": "mixed",
            }
        },
        "nvidia_device_plugin_time_slicing_replicas 4 shares nvidia.com/gpu, which nvidia_device_plugin_mig_strategy "
        "mixed does not advertise",
    ),
    "device plugin image without a tag": (
        {"all_vars": {"nvidia_device_plugin_image": "nvcr.io/nvidia/k8s-device-plugin"}},
        "nvidia_device_plugin_image must be an image REGISTRY/NAME:TAG",
    ),
    "SR-IOV namespace that is no DNS label": (
        {"all_vars": {"sriov_network_namespace": "SRIOV"}},
        "sriov_network_namespace must be a DNS label",
    ),
    "SR-IOV resource prefix that is no DNS name": (
        {"all_vars": {"sriov_network_resource_prefix": "rail forge"}},
        "sriov_network_resource_prefix must be a DNS name like railforge.io",
    ),
    "SR-IOV CNI image without a registry": (
        {"all_vars": {"sriov_network_cni_image": "sriov-cni"}},
        "sriov_network_cni_image must be an image REGISTRY/NAME:TAG",
    ),
    "DCGM exporter port out of range": (
        {"all_vars": {"dcgm_exporter_port": 70000}},
        "dcgm_exporter_port must be between 1 and 65535, got 70000",
    ),
    "DCGM exporter metric that is no DCGM field, with a comma in its help": (
        {"all_vars": {"dcgm_exporter_metrics": [{"field": "GPU_TEMP", "type": "gauge", "help": "temp, in C"}]}},
        "dcgm_exporter_metrics[0].field must be a DCGM field name (DCGM_FI_...)",
    ),
    "MPI operator namespace that is no DNS label": (
        {"all_vars": {"mpi_operator_namespace": "MPI_Operator"}},
        "mpi_operator_namespace must be a DNS label (lowercase letters, digits, '-', at most 63), got 'MPI_Operator'",
    ),
    "scheduler image without a registry": (
        {"all_vars": {"railforge_scheduler_image": "railforge-scheduler:0.1.0"}},
        "railforge_scheduler_image must be an image REGISTRY/NAME:TAG",
    ),
    "unknown hardware class": (
        {"all_vars": {"railforge_benchmark_hardware_class": "h100-sxm"}},
        "railforge_benchmark_hardware_class / railforge_benchmark_floors: hardware class 'h100-sxm' is not known",
    ),
    "floor that is no positive number": (
        {"all_vars": {"railforge_benchmark_floors": {"cpu-fallback": {"floors": {"allreduce": {"bw_gbps": -1}}}}}},
        "railforge_benchmark_hardware_class / railforge_benchmark_floors: railforge_benchmark_floors.cpu-fallback",
    ),
    "registry mirror URL without a scheme": (
        {"all_vars": {"kubernetes_registry_mirrors": {"registry.k8s.io": ["mirror.example.internal:5000"]}}},
        "kubernetes_registry_mirrors must be registry hosts mapped to lists of http(s) mirror URLs",
    ),
    "topology level misspelt": (
        {"host_vars": {"gpu-01": {"railforge_topology": {"spine": "spine-a", "leef": "leaf-01"}}}},
        "gpu-01: railforge_topology must be levels spine, leaf, nvlink-domain mapped to label values",
    ),
    "topology value that is no label value": (
        {"host_vars": {"gpu-01": {"railforge_topology": {"leaf": "leaf 01"}}}},
        "gpu-01: railforge_topology must be levels spine, leaf, nvlink-domain mapped to label values",
    ),
    "storage node pulled into the GPU groups": (
        {"groups": {**GROUPS, "nvswitch_nodes": ["gpu-01", "stor-01"], "gpu_nodes": ["gpu-01", "gpu-02", "stor-01"]}},
        "stor-01 in storage_nodes and in gpu_nodes: a storage node gets no GPU or RDMA stack",
    ),
    "controller-side variable set in a node group": (
        {"group_vars": {"rdma_nodes": {**GROUP_VARS["rdma_nodes"], "rail_networks_nccl_gid_index": 1}}},
        "rail_networks_nccl_gid_index is set per group or host (group gpu_nodes or kube_node or nvswitch_nodes or "
        "rdma_nodes: 1), but its stage runs on the "
        "machine running Ansible, which reads group all alone: move it to group_vars/all",
    ),
    # Kubespray's habit: cluster settings in group_vars/k8s_cluster, here a group of every host (no storage node)
    "controller-side variable set in a group of every host": (
        {
            "groups": {**GROUPS, "storage_nodes": [], "all": GROUPS["k8s_cluster"]},
            "group_vars": {"k8s_cluster": {"railforge_scheduler_replicas": 3}},
        },
        "railforge_scheduler_replicas is set in group k8s_cluster (3), but its stage runs on the machine running "
        "Ansible, which reads group all alone and does not see it there: move it to group_vars/all",
    ),
    # each passed the pre-flight before and stopped the kubernetes stage, after the node stage had run
    "pod network too small for four nodes' ranges": (
        {"all_vars": {"kubernetes_pod_subnet": "10.244.0.0/24"}},
        "kubernetes_pod_subnet must be a network address of at least 4 node ranges (/24 each: /22 or larger), like "
        "10.244.0.0/16, got '10.244.0.0/24'",
    ),
    "cluster DNS domain that is no DNS name": (
        {"all_vars": {"kubernetes_dns_domain": "Cluster.Local"}},
        "kubernetes_dns_domain must be a DNS name like railforge.io, got 'Cluster.Local'",
    ),
    "registry mirror URL with a login": (
        {"all_vars": {"kubernetes_registry_mirrors": {"docker.io": ["https://puller:s3cret@mirror.example.internal"]}}},
        "kubernetes_registry_mirrors must be registry hosts mapped to lists of http(s) mirror URLs like "
        "https://mirror.example.com:5000, without a login, not docker.io: ['https://puller:********@mirror",
    ),
    "controller-side variable set for one host": (
        {"host_vars": {"cp-01": {"kubernetes_mode": "kubeadm"}}},
        "kubernetes_mode is set per group or host (host_vars of cp-01: 'kubeadm')",
    ),
}
CASES["the scheduler's local build, loaded nowhere"] = (
    {"all_vars": {"versions_railforge_scheduler_registry": "localhost"}},
    "railforge_scheduler_image is 'localhost/railforge-scheduler:0.1.0' (set in its default), an image only the "
    "machine that built it has: push it to a registry the nodes pull from",
)
CASES["a site's own operator build, named by hand"] = (
    {"group_vars": {"k8s_cluster": {"mpi_operator_image": "localhost/mpi-operator:0.8.2"}}},
    "mpi_operator_image is 'localhost/mpi-operator:0.8.2' (set in group k8s_cluster), an image only the machine",
)
# A /31 holds 2 addresses, a /30 2 usable ones: 3 RDMA nodes need a /29.
CASES["rail range too small for its nodes"] = (
    {
        "groups": {**GROUPS, "rdma_nodes": ["gpu-01", "gpu-02", "stor-01"], "storage_nodes": []},
        "all_vars": {"rail_networks_cidrs": ["10.200.0.0/24", "10.201.0.0/30"]},
        "host_vars": {"stor-01": GROUP_VARS["rdma_nodes"]},
    },
    "rail_networks_cidrs[1] 10.201.0.0/30 (set in group all) has 2 addresses for 3 nodes on that rail: expected a "
    "prefix of /29 or larger",
)
CASES["hardware facts said to be in the inventory, and none there"] = (
    {"host_vars": {"gpu-02": {"railforge_hw_source": "inventory"}}},
    "gpu-02: railforge_hw_source is inventory but railforge_hw is not set: set the node's railforge_hw in the "
    "inventory",
)
CASES["hand-set hardware facts the gathered ones would replace"] = (
    {"group_vars": {"gpu_nodes": {**GROUP_VARS["gpu_nodes"], "railforge_hw": {"gpus": []}}}},
    "gpu-01, gpu-02: railforge_hw is set in the inventory but railforge_hw_source is gather (the default)",
)


def test_hand_set_hardware_facts_said_so_pass_and_nodes_without_gathering_need_no_source():
    hand_set = {"railforge_hw_source": "inventory", "railforge_hw": {"gpus": []}}
    assert problems_of(host_vars={"gpu-01": hand_set}) == []
    assert problems_of(host_vars={"stor-01": {"railforge_hw": {"gpus": []}}}) == []  # not in gpu/rdma_nodes


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_cluster_mistake_is_refused_naming_the_variable(case):
    change, expected = CASES[case]
    problems = problems_of(**change)
    assert any(expected in problem for problem in problems), problems


def test_every_problem_is_reported_at_once():
    problems = problems_of(
        all_vars={"kubernetes_control_plane_endpoint": "", "kubernetes_version": "v1.36.5", "rail_networks_cidrs": []}
    )
    assert [p.split(" ")[0] for p in problems if "kubernetes_version" in p or "endpoint" in p or "rail_n" in p] == [
        "cp-01,",
        "kubernetes_control_plane_endpoint",
        "rail_networks_cidrs",
    ], problems


def test_existing_mode_accepts_a_readable_kubeconfig(tmp_path):
    kubeconfig = tmp_path / "admin.conf"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    assert problems_of(all_vars={"kubernetes_mode": "existing", "kubernetes_kubeconfig": str(kubeconfig)}) == []
    if os.geteuid() != 0:  # root reads any file
        kubeconfig.chmod(0)
        (problem,) = problems_of(all_vars={"kubernetes_mode": "existing", "kubernetes_kubeconfig": str(kubeconfig)})
        assert "kubernetes_kubeconfig (set in group all) is not readable" in problem


def test_a_cluster_without_rdma_nodes_needs_no_rail_networks():
    groups = {**GROUPS, "rdma_nodes": [], "nvswitch_nodes": []}
    assert problems_of(all_vars={"rail_networks_cidrs": []}, group_vars={"rdma_nodes": {}}, groups=groups) == []


def test_local_images_pass_when_archives_load_them_onto_the_nodes_or_the_cluster_is_brought(tmp_path):
    archives = ["/srv/images/railforge-scheduler.tar"]
    local = {"versions_railforge_scheduler_registry": "localhost", "mpi_operator_image": "localhost/mpi-operator:0.8.2"}
    assert problems_of({**local, "kubernetes_image_archives": archives}) == []
    kubeconfig = tmp_path / "admin.conf"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    brought = {**local, "kubernetes_mode": "existing", "kubernetes_kubeconfig": str(kubeconfig)}
    assert problems_of(brought) == []  # its nodes may have them loaded by hand


def test_one_control_plane_needs_no_endpoint():
    groups = {**GROUPS, "kube_control_plane": ["cp-01"], "all": ["cp-01", *GROUPS["kube_node"]]}
    assert problems_of(all_vars={"kubernetes_control_plane_endpoint": ""}, groups=groups) == []


def test_a_mirror_without_minor_in_its_url_serves_any_version():
    mirror = {"kubernetes_apt_repo_url": "https://mirror.example.internal/kubernetes/", "kubernetes_version": "1.35.2"}
    assert problems_of(all_vars=mirror) == []


def test_a_value_refused_on_several_hosts_says_where_it_is_set():
    """Where is inferred from the hosts holding the refused value: the group of exactly those hosts, group all,
    or their host_vars."""
    (in_all,) = problems_of(all_vars={"kubernetes_version": "v1.36.5"})
    assert in_all.startswith("cp-01, cp-02, cp-03, gpu-01, gpu-02 (+1 more): kubernetes_version must be ")
    assert in_all.endswith(" (set in group all)")
    (in_group,) = problems_of(group_vars={"gpu_nodes": {"railforge_gpu_count": 0}})
    assert in_group.startswith("gpu-01, gpu-02: railforge_gpu_count must be ")
    assert in_group.endswith(" (set in group gpu_nodes or kube_node or nvswitch_nodes or rdma_nodes)")
    two_hosts = problems_of(host_vars={host: {"railforge_gpu_count": 0} for host in ("cp-01", "gpu-01")})
    (in_hosts,) = [problem for problem in two_hosts if problem.startswith("cp-01, gpu-01: railforge_gpu_count")]
    assert in_hosts.endswith(" (set in host_vars of cp-01, gpu-01)"), in_hosts
    (one_host,) = problems_of(host_vars={"gpu-01": {"railforge_gpu_count": 0}})
    assert one_host.startswith("gpu-01: railforge_gpu_count") and "(set in" not in one_host, one_host
