"""A probe role run by ansible-playbook --check against localhost: the tasks under test, as a role runs them.

The probe carries vars/Debian.yml, vars/Ubuntu.yml and vars/Ubuntu-24.yml (probe_os_file names the one loaded) and
a stand-in facts module, fake_os, that presents the node as another OS.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
# A module that presents the node as another OS (its ansible_facts replace the gathered ones).
FACTS_MODULE = """#!/usr/bin/python
# WANT_JSON
import json, sys
args = json.load(open(sys.argv[1]))
print(json.dumps({"changed": False, "ansible_facts": args["facts"]}))
"""


def run(tmp_path: Path, tasks: list, extra: dict | None = None, options: tuple = ()) -> tuple[int, str]:
    """ansible-playbook --check (and `options`) of a probe role holding `tasks`: its exit code and output."""
    role = tmp_path / "roles/probe"
    (role / "tasks").mkdir(parents=True, exist_ok=True)
    (role / "vars").mkdir(exist_ok=True)
    (role / "tasks/main.yml").write_text(yaml.safe_dump(tasks))
    for name in ("Debian", "Ubuntu", "Ubuntu-24"):
        (role / f"vars/{name}.yml").write_text(yaml.safe_dump({"probe_os_file": name}))
    (tmp_path / "library").mkdir(exist_ok=True)
    (tmp_path / "library/fake_os.py").write_text(FACTS_MODULE)
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"localhost": LOCAL}}}))
    (tmp_path / "play.yml").write_text(
        yaml.safe_dump([{"name": "Probe", "hosts": "all", "gather_facts": True, "roles": ["probe"]}])
    )
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": f"{tmp_path / 'roles'}:{ROOT / 'roles'}",
        "ANSIBLE_LIBRARY": f"{tmp_path / 'library'}:{ROOT / 'plugins/modules'}",
        "ANSIBLE_NOCOLOR": "1",
    }
    command = ["ansible-playbook", "--check", *options, "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")]
    result = subprocess.run(
        [*command, "-e", json.dumps(extra or {})], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )
    return result.returncode, result.stdout + result.stderr
