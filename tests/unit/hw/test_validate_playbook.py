"""playbooks/validate.yml shows each node's hardware-facts warnings: here a failing nvidia-smi and an ibdev2netdev
that prints a line of no known shape, read by its facts play (playbooks/facts.yml) from this machine as a one-node
GPU cluster (tag hardware_facts: the pre-flight, the facts plays and the warnings, not the node checks)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_validate_shows_the_fallbacks_of_the_hardware_facts(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tools = {
        "nvidia-smi": "echo 'NVIDIA-SMI has failed because it could not communicate with the driver' >&2; exit 9",
        "ibdev2netdev": "echo 'mlx5_0 port 1 ==> ibp24s0 (U'",
    }
    for name, body in tools.items():
        (bindir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bindir / name).chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
    }
    node = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "railforge_gpu_count": 1}
    inventory = tmp_path / "inventory/hosts.yml"
    inventory.parent.mkdir()
    inventory.write_text(
        json.dumps(
            {
                "all": {
                    "vars": {
                        "railforge_cluster_name": "one",
                        "versions_railforge_scheduler_registry": "registry.test.internal/railforge",
                    },
                    "children": {
                        "kube_control_plane": {"hosts": {"localhost": node}},
                        "kube_node": {"children": {"gpu_nodes": {"hosts": {"localhost": {}}}}},
                    },
                }
            }
        )
    )
    playbook = str(ROOT / "playbooks/validate.yml")
    argv = ["ansible-playbook", "-i", str(inventory), "--tags", "hardware_facts", playbook]
    result = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    shown = out[out.index("TASK [Show the hardware facts' warnings") :]
    assert "nvidia-smi topo -m exited 9: NVIDIA-SMI has failed" in shown, out
    assert "ignoring unparsable output of ibdev2netdev" in shown, out
    assert "Run the node checks" not in out, out
