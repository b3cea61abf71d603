"""A cluster without RDMA nodes: the rail_networks role says so in one line and ends, looking nothing up (no
kubeconfig, no API server is needed), so the network stage passes on a valid inventory without rails."""

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = """
- name: The network stage's role with no node in rail_networks_nodes
  hosts: localhost
  gather_facts: false
  roles:
    - role: rail_networks
      vars:
        rail_networks_nodes: []
  post_tasks:
    - name: Run on after the role
      ansible.builtin.debug:
        msg: after the role
"""


def test_no_rdma_node_skips_the_rails_in_one_line(tmp_path):
    playbook = tmp_path / "network.yml"
    playbook.write_text(PLAYBOOK)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    env["ANSIBLE_ROLES_PATH"] = str(ROOT / "roles")
    result = subprocess.run(
        ["ansible-playbook", "-i", "localhost,", "-c", "local", str(playbook), "--check"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert output.count("rail_networks_nodes is empty (no RDMA node)") == 1
    assert "Look up the NetworkAttachmentDefinition CRD" not in output
    assert "msg: after the role" in output
