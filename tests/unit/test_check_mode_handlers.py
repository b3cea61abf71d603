"""In check mode the service handlers of doca_ofed, roce_qos and sriov_vfs act only on a unit that is on the node.

Each role's own handlers file runs in an ansible-playbook --check against localhost, notified as the role notifies it,
on a node taken for bare metal (the handlers never act in a container). Where the unit comes with this run (openibd
with a package not installed yet; the roles' own units being written), a check run on a fresh host would stop at
"Could not find the requested service": the handler must be skipped. Where the unit is there already, the handler
still runs, so that a check run previews the restart.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
# role, handler, the role's variables on bare metal with the unit coming with this run, the same with the unit there.
CASES = [
    (
        "doca_ofed",
        "Restart openibd",
        {"doca_ofed_virt": "bare-metal", "doca_ofed_package": "railforge-not-installed"},
        {"doca_ofed_package": "bash"},
    ),
    (
        "roce_qos",
        "Apply RoCE QoS",
        {"roce_qos_virt": "bare-metal", "roce_qos_unit": {"changed": True}},
        {"roce_qos_unit": {"changed": False}},
    ),
    (
        "sriov_vfs",
        "Create the VFs",
        {"sriov_vfs_virt": "bare-metal", "sriov_vfs_unit": {"changed": True}},
        {"sriov_vfs_unit": {"changed": False}},
    ),
]


def check_run_handler(tmp_path: Path, role: str, handler: str, variables: dict) -> str:
    """ansible-playbook --check of a play that notifies `handler` from the role's handlers file; its output."""
    play = [
        {
            "name": "Notify a handler of the role",
            "hosts": "all",
            "gather_facts": False,
            "vars": variables,
            "tasks": [
                {"name": "Read the installed packages", "ansible.builtin.package_facts": {"manager": "apt"}},
                {
                    "name": "Change what the handler applies",
                    "ansible.builtin.debug": {"msg": "changed"},
                    "changed_when": True,
                    "notify": handler,
                },
            ],
            "handlers": [
                {
                    "name": "The role's handlers",
                    "ansible.builtin.import_tasks": str(ROOT / f"roles/{role}/handlers/main.yml"),
                }
            ],
        }
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"localhost": LOCAL}}}))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    result = subprocess.run(
        ["ansible-playbook", "--check", "-i", tmp_path / "hosts.yml", tmp_path / "play.yml"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    return result.stdout + result.stderr


def handler_outcome(output: str, handler: str) -> str:
    """The first word after the handler's header: skipping, ok, changed or fatal."""
    after = output.split(f"RUNNING HANDLER [{handler}]", 1)
    assert len(after) == 2, output
    return after[1].split("*\n", 1)[1].split(":", 1)[0].strip()


@pytest.mark.parametrize(("role", "handler", "unit_from_this_run", "unit_there"), CASES, ids=[c[0] for c in CASES])
def test_a_check_run_skips_a_handler_whose_unit_this_run_brings(
    tmp_path, role, handler, unit_from_this_run, unit_there
):
    output = check_run_handler(tmp_path, role, handler, unit_from_this_run)
    assert handler_outcome(output, handler) == "skipping", output
    assert "failed=0" in output, output


@pytest.mark.parametrize(("role", "handler", "unit_from_this_run", "unit_there"), CASES, ids=[c[0] for c in CASES])
def test_a_check_run_still_previews_the_restart_of_a_unit_already_there(
    tmp_path, role, handler, unit_from_this_run, unit_there
):
    # This host has no such unit: the handler acting at all shows that only the unit's origin held it back above.
    output = check_run_handler(tmp_path, role, handler, unit_from_this_run | unit_there)
    assert handler_outcome(output, handler) != "skipping", output


@pytest.mark.parametrize(("role", "handler", "unit_from_this_run", "unit_there"), CASES, ids=[c[0] for c in CASES])
def test_no_handler_acts_in_a_container(tmp_path, role, handler, unit_from_this_run, unit_there):
    virt = f"{role}_virt"
    output = check_run_handler(tmp_path, role, handler, unit_from_this_run | unit_there | {virt: "container"})
    assert handler_outcome(output, handler) == "skipping", output
