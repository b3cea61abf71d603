"""Helpers to run a role against localhost in check mode: input validation must stop it before any change."""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def run_role(tmp_path):
    def run(role: str, variables: dict, *, inventory: str = "localhost,") -> subprocess.CompletedProcess:
        playbook = tmp_path / "play.yml"
        playbook.write_text(f"- hosts: all\n  connection: local\n  gather_facts: false\n  roles: [{role}]\n")
        extra = tmp_path / "vars.json"
        extra.write_text(json.dumps(variables))
        env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
        return subprocess.run(
            ["ansible-playbook", "--check", "-i", inventory, "-e", f"@{extra}", str(playbook)],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            check=False,
        )

    return run


@pytest.fixture
def refused(run_role):
    def run(role: str, variables: dict, first_change: str, **options) -> str:
        """Run the role with bad input: it must fail, change nothing and never reach the task named `first_change`.
        Returns the run's output."""
        result = run_role(role, variables, **options)
        output = result.stdout + result.stderr
        assert result.returncode == 2, output
        assert "changed=0" in output
        assert first_change not in output
        return output

    return run
