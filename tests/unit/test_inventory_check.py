"""playbooks/inventory_check.yml against malformed inventories: every problem named, all at once, nothing run.

Each file in tests/fixtures/inventories is a broken inventory; its `# expect:` lines are problems the check
must report, word for word.
"""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MALFORMED = sorted((ROOT / "tests/fixtures/inventories").glob("*.yml"))


def run_check(inventory: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(
        ["ansible-playbook", "-i", str(inventory), str(ROOT / "playbooks/inventory_check.yml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )


def expected_problems(inventory: Path) -> list[str]:
    return [
        line.removeprefix("# expect: ")
        for line in inventory.read_text().splitlines()
        if line.startswith("# expect: ")
    ]


def test_there_are_at_least_ten_malformed_inventories():
    assert len(MALFORMED) >= 10


@pytest.mark.parametrize("inventory", MALFORMED, ids=[path.stem for path in MALFORMED])
def test_malformed_inventory_fails_with_every_expected_problem(inventory):
    result = run_check(inventory)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "problem(s); nothing was changed" in output
    for problem in expected_problems(inventory):
        assert f"- {problem}" in output, f"missing: {problem}\n{output}"


@pytest.mark.parametrize("inventory", ["inventories/example/hosts.yml", "inventories/lab/hosts.yml"])
def test_shipped_inventories_pass(inventory):
    result = run_check(ROOT / inventory)
    assert result.returncode == 0, result.stdout + result.stderr
