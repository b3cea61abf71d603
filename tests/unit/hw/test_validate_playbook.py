"""playbooks/validate.yml shows each node's hardware-facts warnings: here a failing nvidia-smi and an ibdev2netdev
that prints a line of no known shape, on localhost (tag hardware_facts: only the facts play runs)."""

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
    variables = json.dumps({"ansible_python_interpreter": sys.executable})
    playbook = str(ROOT / "playbooks/validate.yml")
    argv = [
        "ansible-playbook",
        "-i",
        "localhost,",
        "-c",
        "local",
        "--tags",
        "hardware_facts",
        "-e",
        variables,
        playbook,
    ]
    result = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    shown = out[out.index("TASK [Show the hardware facts' warnings]") :]
    assert "nvidia-smi topo -m exited 9: NVIDIA-SMI has failed" in shown, out
    assert "ignoring unparsable output of ibdev2netdev" in shown, out
    assert "Run the node checks" not in out, out
