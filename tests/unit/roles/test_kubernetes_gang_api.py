"""kubeadm's configuration with Kubernetes' own gang API asked for: the gates on the API server, the controller
manager and kube-scheduler, the API version served; without it, no extra arguments at all."""

from role_templates import render

HOST = {"ansible_managed": "", "inventory_hostname": "cp-01", "kubernetes_endpoint": "10.10.0.11:6443"}
GATES = {"name": "feature-gates", "value": "GenericWorkload=true,GangScheduling=true,WorkloadWithJob=true"}


def cluster_configuration(**overrides) -> dict:
    objects = render("kubernetes", "kubeadm-init.yaml.j2", kubernetes_node_ip="10.10.0.11", **HOST, **overrides)
    (found,) = [obj for obj in objects if obj["kind"] == "ClusterConfiguration"]
    return found


def test_the_gang_api_turns_the_gates_on_every_control_plane_component_and_serves_the_version():
    config = cluster_configuration(kubernetes_gang_scheduling_api=True)
    assert config["apiServer"]["extraArgs"] == [
        GATES,
        {"name": "runtime-config", "value": "scheduling.k8s.io/v1alpha2=true"},
    ]
    assert config["controllerManager"]["extraArgs"] == [GATES]
    assert config["scheduler"]["extraArgs"] == [GATES]


def test_without_it_the_control_plane_keeps_kubeadm_defaults():
    config = cluster_configuration()
    assert "extraArgs" not in config["apiServer"]
    assert "controllerManager" not in config and "scheduler" not in config
