"""Malformed inventories through the real `ansible-playbook playbooks/site.yml --check`: the run stops at the
pre-flight, before the first node task, naming every problem; no node is ever contacted. Every entry playbook
stops there too, and on an inventory without hosts (empty, unparsable, or a wrong -i path); a group_vars or
host_vars file that is not YAML stops the run before the pre-flight, named with its line (plugins/vars).

Each entry of tests/fixtures/inventories/overlays/malformed.yml is laid over a copy of inventories/example (whose
10.x addresses are no machines of ours): SSH is made to fail locally (ProxyCommand=false), and the tests assert
that no task other than the inventory check ran and that no host was even tried. The entries of accepted.yml,
unusual but sound, must pass the check.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = yaml.safe_load((ROOT / "tests/fixtures/inventories/overlays/malformed.yml").read_text())
CHECK_TASK = "Check groups, every variable of every role and the inventory, and the rules between them"
PROXY_PASSWORD = "S3cr3t-Pa55"
# One run with --limit (the broken host is another one) and one with the tags of a node stage.
EXTRA_ARGS = {"ansible-host-octet-400": ["--limit", "dgx-01"], "dcgm-cuda13-on-driver-570": ["--tags", "nvidia_driver"]}
# One run of the node stage on its own: it validates too.
PLAYBOOK = {"sriov-num-vfs-quoted": "playbooks/nodes.yml"}


def inventory_with(tmp_path: Path, overlay: dict) -> Path:
    inventory = tmp_path / "inventory"
    shutil.copytree(ROOT / "inventories/example", inventory)
    for group, variables in overlay.get("group_vars", {}).items():
        # group_vars files load in name order: this one comes last and wins.
        (inventory / "group_vars" / group).mkdir(exist_ok=True)
        (inventory / "group_vars" / group / "zz-overlay.yml").write_text(yaml.safe_dump(variables))
    for host, variables in overlay.get("host_vars", {}).items():
        (inventory / "host_vars").mkdir(exist_ok=True)
        (inventory / "host_vars" / f"{host}.yml").write_text(yaml.safe_dump(variables))
    return inventory / "hosts.yml"


def run(playbook: str, inventory: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        # Any SSH attempt fails on this machine: the inventory's addresses must never see a packet.
        "ANSIBLE_SSH_ARGS": "-o ProxyCommand=false",
    }
    return subprocess.run(
        ["ansible-playbook", "-i", str(inventory), str(ROOT / playbook), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )


def assert_stopped_in_the_preflight(result: subprocess.CompletedProcess, message: str) -> None:
    """The run failed at the pre-flight's one task, naming the problem, and no host was tried."""
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert message in output, output
    assert re.findall(r"^TASK \[(.*?)\]", output, re.MULTILINE) == [CHECK_TASK], output
    assert "UNREACHABLE" not in output and "Gathering Facts" not in output
    # The recap lists the one host the check ran for; every other count is zero.
    assert re.findall(r"^(\S+)\s+: ok=0\s+changed=0\s+unreachable=0\s+failed=1", output, re.MULTILINE), output


def test_there_are_at_least_thirty_malformed_inventories():
    assert len(OVERLAYS) >= 30


@pytest.mark.parametrize("name", sorted(OVERLAYS))
def test_site_check_stops_before_any_node_task_naming_every_problem(tmp_path, name):
    playbook = PLAYBOOK.get(name, "playbooks/site.yml")
    result = run(playbook, inventory_with(tmp_path, OVERLAYS[name]), "--check", *EXTRA_ARGS.get(name, []))
    assert_stopped_in_the_preflight(result, "problem(s); nothing was changed")
    for problem in OVERLAYS[name]["expect"]:
        assert problem in result.stdout + result.stderr, f"missing: {problem}\n{result.stdout}"


ENTRY_PLAYBOOKS = sorted(
    path.name
    for path in (ROOT / "playbooks").glob("*.yml")
    if path.name not in {"preflight.yml", "rollout.yml", "site.meta.yml"}  # imported by the entry playbooks
)
# Inventories without hosts: hosts.yml with this text, or None for an -i path that is not there.
NO_HOSTS = {"empty": "", "unparsable": "all: [\n", "missing": None}


def test_the_entry_playbooks_are_all_there():
    entries = {"site.yml", "nodes.yml", "facts.yml", "validate.yml", "benchmark.yml", "scale.yml", "reset.yml"}
    assert entries | {"upgrade.yml"} <= set(ENTRY_PLAYBOOKS)


@pytest.mark.parametrize("inventory", ["malformed", *NO_HOSTS])
@pytest.mark.parametrize("playbook", ENTRY_PLAYBOOKS)
def test_every_entry_playbook_stops_in_the_preflight(tmp_path, playbook, inventory):
    if inventory == "malformed":
        hosts, message = inventory_with(tmp_path, OVERLAYS["sriov-num-vfs-quoted"]), "sriov_vfs_pfs[0].num_vfs"
    else:
        hosts, message = tmp_path / "hosts.yml", f"The inventory {tmp_path / 'hosts.yml'} has no hosts"
        if NO_HOSTS[inventory] is not None:
            hosts.write_text(NO_HOSTS[inventory])
    assert_stopped_in_the_preflight(run(f"playbooks/{playbook}", hosts, "--check"), message)


@pytest.mark.parametrize(
    ("folder", "text", "where"),
    [
        ("group_vars/all", "foo: [1, 2\nbar: 3\n", "2:4"),  # an unclosed flow sequence
        ("host_vars/dgx-01", "ansible_host: 10.0.0.1\n  bad_indent: 1\n", "2:13"),
    ],
)
def test_a_vars_file_that_is_not_yaml_is_named_with_its_line_before_any_task(tmp_path, folder, text, where):
    hosts = inventory_with(tmp_path, {})
    broken = hosts.parent / folder / "zz-broken.yml"
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_text(text)
    result = run("playbooks/site.yml", hosts, "--check")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert f"{broken}:{where}: not YAML: " in output, output
    assert "TASK [" not in output and "UNREACHABLE" not in output, output


def test_an_authenticated_proxy_is_accepted_and_its_password_never_printed(tmp_path):
    proxy = f"http://railforge:{PROXY_PASSWORD}@proxy.example.internal:3128"
    overlay = {"group_vars": {"all": {"common_http_proxy": proxy, "common_https_proxy": proxy}}}
    result = run("playbooks/preflight.yml", inventory_with(tmp_path, overlay), "-vvv")
    assert result.returncode == 0, result.stdout + result.stderr
    assert PROXY_PASSWORD not in result.stdout + result.stderr


def test_a_refused_proxy_is_shown_with_its_password_masked(tmp_path):
    result = run("playbooks/site.yml", inventory_with(tmp_path, OVERLAYS["proxy-password-masked"]), "--check", "-vvv")
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "railforge:********@proxy example.internal:3128" in output
    assert PROXY_PASSWORD not in output
    assert "common_http_proxy" not in output.split("nothing was changed", 1)[1].split("PLAY RECAP")[0]


ACCEPTED = yaml.safe_load((ROOT / "tests/fixtures/inventories/overlays/accepted.yml").read_text())


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_unusual_but_sound_inventories_are_accepted(tmp_path, name):
    result = run("playbooks/preflight.yml", inventory_with(tmp_path, ACCEPTED[name]))
    assert result.returncode == 0, result.stdout + result.stderr
