"""The summary that ends site.yml (plugins/callback/railforge_summary.py), through a real ansible-playbook run with
the project's ansible.cfg: two local hosts, one whose role changes something and whose reboot was done, one whose
reboot is pending and whose last task fails; both carry the same run note (as apt_source.yml leaves one for a key
checked by its long id). Nothing leaves this machine (connection local)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
NOTE = "file:///srv/key.asc was checked by its long key id A024F6F0E6D6A281 only"

PLAYBOOK = [
    {
        "name": "Stand in for the node stage",
        "hosts": "all",
        "gather_facts": False,
        "roles": [{"role": "demo"}],
        "tasks": [
            {
                "name": "Record what node_reboot records",
                "ansible.builtin.set_fact": {
                    "node_reboot_pending": "{{ [{'reason': 'nvidia_driver: new driver'}] }}",
                    "node_reboot_rebooted": "{{ inventory_hostname == 'node-a' }}",
                    "node_reboot_failure": "",
                    "versions_run_notes": [NOTE],
                },
            },
            {
                "name": "Fail on node-b",
                "ansible.builtin.fail": {"msg": "broken"},
                "when": "inventory_hostname == 'node-b'",
            },
        ],
    }
]


def test_site_run_ends_with_a_per_node_summary_and_a_json_report(tmp_path):
    (tmp_path / "playbooks").mkdir()
    # a stage of site.yml is its own playbook file, as in playbooks/
    (tmp_path / "playbooks/nodes.yml").write_text(yaml.safe_dump(PLAYBOOK, sort_keys=False))
    site = [{"name": "Nodes", "ansible.builtin.import_playbook": "nodes.yml"}, {**PLAYBOOK[0], "roles": []}]
    (tmp_path / "playbooks/site.yml").write_text(yaml.safe_dump(site, sort_keys=False))
    tasks = tmp_path / "roles/demo/tasks"
    tasks.mkdir(parents=True)
    change = {"name": "Change something", "ansible.builtin.command": "true", "changed_when": True}
    tasks.joinpath("main.yml").write_text(yaml.safe_dump([change, change]))
    inventory = tmp_path / "hosts.yml"
    hosts = {"node-a": {}, "node-b": {}}
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": hosts,
                    "vars": {
                        "ansible_connection": "local",
                        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                    },
                }
            }
        )
    )
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(tmp_path / "roles"),
        "ANSIBLE_NOCOLOR": "1",
    }
    result = subprocess.run(
        ["ansible-playbook", "-i", str(inventory), str(tmp_path / "playbooks/site.yml")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output

    summary = output[output.index("RAILFORGE SUMMARY") :]
    assert "node-a: changed: demo 2; rebooted: yes (nvidia_driver: new driver)" in summary
    assert "node-b: changed: demo 2; rebooted: no" in summary
    assert "needs attention: failed: Fail on node-b" in summary
    assert "needs attention: reboot pending: nvidia_driver: new driver" in summary
    assert summary.count(NOTE) == 1 and f"note (node-a, node-b): {NOTE}" in summary
    reports = list((tmp_path / "reports").glob("site-*.json"))
    assert len(reports) == 1 and f"JSON report: {reports[0]}" in summary
    assert re.search(r"^stage times: nodes \d+ s, site \d+ s$", summary, re.MULTILINE), summary
    assert json.loads(reports[0].read_text()) == {
        "node-a": {
            "changed": {"demo": 2},
            "rebooted": True,
            "reboot_reasons": ["nvidia_driver: new driver"],
            "attention": [],
            "notes": [NOTE],
        },
        "node-b": {
            "changed": {"demo": 2},
            "rebooted": False,
            "reboot_reasons": ["nvidia_driver: new driver"],
            "attention": ["failed: Fail on node-b", "reboot pending: nvidia_driver: new driver"],
            "notes": [NOTE],
        },
    }


def test_other_playbooks_get_no_summary(tmp_path):
    playbook = tmp_path / "validate.yml"
    playbook.write_text(yaml.safe_dump([{**PLAYBOOK[0], "roles": []}]))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}
    result = subprocess.run(
        [
            "ansible-playbook",
            "-i",
            "node-a,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            str(playbook),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "RAILFORGE SUMMARY" not in result.stdout and not (tmp_path / "reports").exists()
