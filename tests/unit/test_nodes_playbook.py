"""The node stage's shape, as Ansible itself reads it (`ansible-playbook --list-tasks`, which contacts no host):
the pre-flight first, one batched play, the roles by group, node_reboot last and under every tag, the
hardware facts after it.
What the rollout does on hosts is run for real in tests/k8s/test_node_reboot.py."""

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks/nodes.yml"


def list_tasks(*args: str) -> str:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_SSH_ARGS": "-o ProxyCommand=false"}
    result = subprocess.run(
        ["ansible-playbook", "-i", str(ROOT / "inventories/example/hosts.yml"), str(PLAYBOOK), "--list-tasks", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def roles_of_tasks(listing: str) -> list[str]:
    """The roles whose own tasks (not their argument checks) are listed, in order, each once; versions, the pins
    the node roles depend on, aside."""
    roles = []
    for role, task in re.findall(r"^\s+(\w+) : (.*?)\tTAGS", listing, re.MULTILINE):
        if not task.startswith("Validating arguments") and role not in roles and role != "versions":
            roles.append(role)
    return roles


def test_the_node_roles_run_in_one_batched_play_in_order_with_the_reboot_last():
    plays = yaml.safe_load(PLAYBOOK.read_text())
    assert plays[0]["ansible.builtin.import_playbook"] == "preflight.yml"
    # the hardware facts are read after the node play, once the drivers are in
    assert plays[-1]["ansible.builtin.import_playbook"] == "facts.yml"
    assert {"serial", "max_fail_percentage"} <= set(plays[-2])
    assert roles_of_tasks(list_tasks()) == [
        "common",
        "doca_ofed",
        "nvidia_driver",
        "nvidia_fabricmanager",
        "cuda_toolkit",
        "nvidia_container_toolkit",
        "nvidia_dcgm",
        "gpudirect",
        "sriov_vfs",
        "roce_qos",
        "node_reboot",
    ]


@pytest.mark.parametrize("tag", ["nvidia_driver", "gpudirect", "common"])
def test_a_role_tag_runs_that_role_then_the_reboot(tag):
    assert roles_of_tasks(list_tasks("--tags", tag)) == [tag, "node_reboot"]
