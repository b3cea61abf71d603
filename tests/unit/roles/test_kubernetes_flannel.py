"""The kubernetes role's flannel objects as its template renders them: least privilege for --kube-subnet-mgr, a
DaemonSet on every node without privileged mode, and a net-conf.json of the pod subnet and the chosen backend whose
change rolls the pods."""

import functools
import json
import os
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
LOOKUP = "{{ lookup('ansible.builtin.template', 'roles/kubernetes/templates/flannel.yaml.j2') }}"


@functools.cache
def _rendered(overrides: str) -> list[dict]:
    """The template as Ansible renders it (a play on localhost, no connection), with the pins, the role's defaults
    and the overrides (JSON)."""
    variables = {
        **yaml.safe_load((ROOT / "roles/versions/defaults/main.yml").read_text()),
        **yaml.safe_load((ROOT / "roles/kubernetes/defaults/main.yml").read_text()),
        **json.loads(overrides),
    }
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "json"}
    env.update(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_LOCALHOST_WARNING="false")
    debug = ["-m", "ansible.builtin.debug", "-a", f"msg={LOOKUP}", "-e", json.dumps(variables)]
    result = subprocess.run(
        ["ansible", "localhost", "-c", "local", *debug],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    text = json.loads(result.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
    return [obj for obj in yaml.safe_load_all(text) if obj]


def objects(**overrides) -> list[dict]:
    return _rendered(json.dumps({"kubernetes_pod_subnet": "10.244.0.0/16", **overrides}, sort_keys=True))


def one(rendered: list[dict], kind: str) -> dict:
    (found,) = [obj for obj in rendered if obj["kind"] == kind]
    return found


def flanneld(rendered: list[dict]) -> dict:
    return one(rendered, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]


def test_the_cluster_role_grants_only_what_the_kube_subnet_manager_uses():
    rules = one(objects(), "ClusterRole")["rules"]
    granted = {(resource, verb) for rule in rules for resource in rule["resources"] for verb in rule["verbs"]}
    assert granted == {("nodes", "get"), ("nodes", "list"), ("nodes", "watch"), ("nodes/status", "patch")}
    assert all(rule["apiGroups"] == [""] for rule in rules)
    subject = one(objects(), "ClusterRoleBinding")["subjects"][0]
    assert (subject["name"], subject["namespace"]) == ("flannel", "kube-flannel")


def test_the_daemon_set_runs_on_every_node_in_the_host_network_without_privileged_mode():
    rendered = objects()
    pod = one(rendered, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["tolerations"] == [{"operator": "Exists"}]
    container = flanneld(rendered)
    assert container["image"].startswith("ghcr.io/flannel-io/flannel:v")
    assert container["securityContext"] == {"privileged": False, "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}}
    assert container["args"] == ["--kube-subnet-mgr", "--ip-masq", "--iface=$(FLANNEL_IFACE)"]


def test_flannel_uses_the_node_ip_unless_an_interface_is_named():
    by_default = {env["name"]: env for env in flanneld(objects())["env"]}
    assert by_default["FLANNEL_IFACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    assert by_default["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    named = {env["name"]: env for env in flanneld(objects(kubernetes_flannel_iface="bond0"))["env"]}
    assert named["FLANNEL_IFACE"] == {"name": "FLANNEL_IFACE", "value": "bond0"}


def test_net_conf_names_the_pod_subnet_and_backend_and_a_new_one_rolls_the_pods():
    def net_conf_and_annotation(backend: str) -> tuple[dict, str]:
        rendered = objects(kubernetes_flannel_backend=backend)
        annotations = one(rendered, "DaemonSet")["spec"]["template"]["metadata"]["annotations"]
        return json.loads(one(rendered, "ConfigMap")["data"]["net-conf.json"]), annotations[
            "railforge.io/net-conf-sha256"
        ]

    vxlan, vxlan_hash = net_conf_and_annotation("vxlan")
    host_gw, host_gw_hash = net_conf_and_annotation("host-gw")
    assert vxlan == {"Network": "10.244.0.0/16", "Backend": {"Type": "vxlan"}}
    assert host_gw["Backend"] == {"Type": "host-gw"}
    assert vxlan_hash != host_gw_hash
