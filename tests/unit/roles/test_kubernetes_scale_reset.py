"""playbooks/scale.yml and playbooks/reset.yml refuse a bad choice of hosts before they contact any host: the
inventory's hosts are unreachable on purpose (ssh through ProxyCommand=false), so a refusal that came late would
show up as an unreachable host instead of the message (the filters behind them: test_kubernetes_input.py)."""

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

INVENTORY = """
all:
  vars: {ansible_host: 192.0.2.1, ansible_python_interpreter: /usr/bin/python3, railforge_cluster_name: test,
    versions_railforge_scheduler_registry: registry.test.internal/railforge}
  children:
    kube_control_plane:
      hosts:
        cp-1: {railforge_node_ip: 192.0.2.11}
        cp-2: {railforge_node_ip: 192.0.2.12}
        cp-3: {railforge_node_ip: 192.0.2.13}
    kube_node:
      hosts:
        worker-1: {railforge_node_ip: 192.0.2.21}
    k8s_cluster:
      children: {kube_control_plane: {}, kube_node: {}}
      vars: {kubernetes_control_plane_endpoint: "api.example.internal:6443"}
"""


def run_playbook(tmp_path, playbook: str, *extra: str) -> str:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY)
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_SSH_ARGS": "-o ProxyCommand=false",
    }
    result = subprocess.run(
        ["ansible-playbook", "-i", str(inventory), *extra, f"playbooks/{playbook}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "UNREACHABLE" not in output and "unreachable=1" not in output, output
    recap = re.findall(r"^\S+\s+: ok=\d+\s+changed=(\d+)", output, re.M)
    assert recap and set(recap) == {"0"}, output
    return output


# playbook -> case -> (extra arguments, message); each stops before its first task that contacts a host.
FIRST_CONTACT = {
    "reset.yml": ("Find the lost node in the cluster", "Find this node in the cluster"),
    "scale.yml": ("Find out whether the first control plane",),
}
CASES = {
    "reset, no hosts named": (
        "reset.yml",
        [],
        "kubernetes_reset_hosts, kubernetes_reset_lost_hosts: name the hosts to take out",
    ),
    "reset, a lost host that is also reset": (
        "reset.yml",
        ["-e", '{"kubernetes_reset_hosts": ["worker-1"], "kubernetes_reset_lost_hosts": ["worker-1", "cp-3"]}'],
        "kubernetes_reset_lost_hosts: worker-1 is also in kubernetes_reset_hosts",
    ),
    "reset, the first control plane lost": (
        "reset.yml",
        ["-e", '{"kubernetes_reset_lost_hosts": ["cp-1"]}'],
        "kubernetes_reset_lost_hosts: cp-1 is the first control plane, which this run leaves alone",
    ),
    "reset, the first control plane": (
        "reset.yml",
        ["-e", '{"kubernetes_reset_hosts": ["worker-1", "cp-1"]}'],
        "kubernetes_reset_hosts: cp-1 is the first control plane, which this run leaves alone",
    ),
    "reset, every host": (
        "reset.yml",
        ["-e", '{"kubernetes_reset_hosts": ["cp-1", "cp-2", "cp-3", "worker-1"]}'],
        "cp-1 is the first",
    ),
    "reset, an unknown host": (
        "reset.yml",
        ["-e", '{"kubernetes_reset_hosts": ["worker-9"]}'],
        "worker-9 is not a host of k8s_cluster",
    ),
    "reset, a relative backup directory": (
        "reset.yml",
        ["-e", '{"kubernetes_reset_hosts": ["worker-1"]}', "-e", "kubernetes_reset_backup_dir=backups"],
        "kubernetes_reset_backup_dir an absolute path (got 'backups')",
    ),
    "reset, a string": (
        "reset.yml",
        ["-e", "kubernetes_reset_hosts=worker-1"],
        "kubernetes_reset_hosts must be a list, got 'worker-1' (str)",
    ),
    "scale, no hosts named": ("scale.yml", [], "kubernetes_scale_hosts: name the hosts"),
    "scale, the first control plane": (
        "scale.yml",
        ["-e", '{"kubernetes_scale_hosts": ["cp-1"]}'],
        "cp-1 is the first control plane",
    ),
    "scale, a host not in the inventory": (
        "scale.yml",
        ["-e", '{"kubernetes_scale_hosts": ["cp-2", "worker-7"]}'],
        "kubernetes_scale_hosts: worker-7 is not a host of k8s_cluster",
    ),
    "scale, a cluster you bring": (
        "scale.yml",
        ["-e", '{"kubernetes_scale_hosts": ["worker-1"]}', "-e", "kubernetes_mode=existing"],
        "kubernetes_mode is existing: scale.yml adds nodes to a cluster made by kubeadm",
    ),
}


@pytest.mark.parametrize(("playbook", "extra", "message"), CASES.values(), ids=CASES.keys())
def test_refused_before_contacting_a_host(tmp_path, playbook, extra, message):
    output = run_playbook(tmp_path, playbook, *extra)
    assert message in output
    assert "nothing was changed" in output
    assert not [task for task in FIRST_CONTACT[playbook] if task in output]
