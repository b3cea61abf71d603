"""kubernetes_mode existing (playbooks/kubernetes.yml) against the test bed's real API server: the stage installs
nothing, reports the cluster's version, and the devices stage then applies to that cluster with nothing but
kubernetes_kubeconfig set; a kubeconfig that is not there, or whose cluster does not answer, stops the stage with a
message naming kubernetes_kubeconfig."""

import json
import re

from conftest import changed, run_playbook
from k8s_helpers import dgx_h100_facts, ensure_namespace
from kubernetes import client

from railforge.testbed import pki
from railforge.testbed.controlplane import add_api_node

NAMESPACE = "rf-byo-system"
GPU_NODE = "rf-byo-gpu"


def inventory(tmp_path, kubeconfig) -> str:
    """A cluster you bring: one k8s_cluster host run locally, one GPU node, and only kubernetes_kubeconfig set."""
    hosts = {
        "all": {
            "vars": {"kubernetes_kubeconfig": str(kubeconfig)},
            "children": {
                "k8s_cluster": {"hosts": {"byo-cp": {"ansible_connection": "local"}}},
                "gpu_nodes": {"hosts": {GPU_NODE: {"railforge_hw": dgx_h100_facts()}}},
            },
        }
    }
    path = tmp_path / "hosts.yml"
    path.write_text(json.dumps(hosts))
    return path


def words(result) -> str:
    return " ".join((result.stdout + result.stderr).split())  # the callback wraps long messages


def test_existing_mode_installs_nothing_and_the_devices_stage_applies(control_plane, tmp_path):
    hosts = inventory(tmp_path, control_plane.admin_kubeconfig)
    result = run_playbook("playbooks/kubernetes.yml", {"kubernetes_mode": "existing"}, tmp_path, inventory=hosts)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"byo-cp\s*: ok=\d+\s+changed=0\s+unreachable=0\s+failed=0", result.stdout), result.stdout
    version = client.VersionApi(control_plane.api).get_code().git_version
    assert f"the add-ons go to Kubernetes {version} of {control_plane.admin_kubeconfig}" in words(result)

    ensure_namespace(control_plane, NAMESPACE)
    core = client.CoreV1Api(control_plane.api)
    if not core.list_node(field_selector=f"metadata.name={GPU_NODE}").items:
        add_api_node(control_plane, GPU_NODE, {"cpu": "64"})
    namespaces = {"nvidia_device_plugin_namespace": NAMESPACE, "dcgm_exporter_namespace": NAMESPACE}
    applied = changed(run_playbook("playbooks/devices.yml", namespaces, tmp_path, inventory=hosts))
    assert {f"Node {GPU_NODE}", "DaemonSet nvidia-device-plugin", "DaemonSet dcgm-exporter"} <= applied
    assert core.read_node(GPU_NODE).metadata.labels["nvidia.com/gpu.present"] == "true"


def test_a_kubeconfig_that_is_not_there_stops_the_stage(tmp_path):
    missing = tmp_path / "nowhere" / "admin.conf"
    result = run_playbook(
        "playbooks/kubernetes.yml", {"kubernetes_mode": "existing"}, tmp_path, inventory=inventory(tmp_path, missing)
    )
    assert result.returncode == 2, result.stdout + result.stderr
    # the pre-flight's rule, before any host is contacted
    assert (
        f"kubernetes_kubeconfig (set in group all) is not there: kubernetes_mode existing expects the kubeconfig of "
        f"the cluster you bring at '{missing}' on the machine running Ansible" in words(result)
    )


def test_a_kubeconfig_whose_cluster_does_not_answer_stops_the_stage(control_plane, tmp_path):
    # the test bed's CA and a client certificate, but a loopback port nothing listens on
    cert, key = control_plane.ca.issue("byo-admin", "byo-admin")
    silent = pki.kubeconfig(
        tmp_path / "silent.conf", "https://127.0.0.1:9", control_plane.ca.cert_path, cert, key, "byo-admin"
    )
    result = run_playbook(
        "playbooks/kubernetes.yml", {"kubernetes_mode": "existing"}, tmp_path, inventory=inventory(tmp_path, silent)
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"kubernetes_kubeconfig: the cluster of '{silent}' did not answer" in words(result)
