"""Hardware facts between plays, through the real `ansible-playbook`: a role's device detection never hides a host's
full railforge_hw, and playbooks/facts.yml gathers each node's facts once, keeps them under the inventory's
artifacts/hw/ and loads them when a later run reads no node. The "node" read is this machine (connection local,
read only); every other host is SSH that fails locally (ProxyCommand=false), so a contact would show UNREACHABLE.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
ENV = {
    **os.environ,
    "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
    "ANSIBLE_NOCOLOR": "1",
    "ANSIBLE_SSH_ARGS": "-o ProxyCommand=false",
    "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
}
RAILS = [{"gpu": 0, "hca": "mlx5_0", "port": 1, "netdev": "ibp0", "link_layer": "InfiniBand"}]
HAND_SET = {"gpu_count": 4, "rails": RAILS, "warnings": ["set by hand"]}


def playbook(path: Path, inventory: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ansible-playbook", "-i", str(inventory), str(path), *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=ROOT,
        check=False,
    )


def messages(output: str) -> dict:
    """The debug messages of a run: the loop item (or host) -> msg."""
    decoder, shown = json.JSONDecoder(), {}
    for head, _, rest in (part.partition(" => {") for part in output.split("\nok: [")[1:]):
        if rest:
            result = decoder.raw_decode("{" + rest)[0]
            if "msg" in result:
                shown[head.partition("(item=")[2].rstrip(")") or head.split("]")[0]] = result["msg"]
    return shown


def test_device_detection_leaves_the_inventorys_rails_to_the_next_play(tmp_path):
    """The node roles' `scope: devices` detection, then a play on the machine running Ansible that reads the node's
    railforge_hw (as the network stage does): the rails the inventory set are still there."""
    inventory = tmp_path / "hosts.yml"
    node = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "railforge_hw": HAND_SET}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"node-1": node}}}))
    plays = [
        {
            "name": "Detect the devices as the node roles do",
            "hosts": "node-1",
            "gather_facts": False,
            "tasks": [{"railforge_hw_facts": {"root": str(tmp_path), "scope": "devices"}, "register": "detected"}],
        },
        {
            "name": "Read the node's facts from the machine running Ansible",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [{"ansible.builtin.debug": {"msg": "{{ hostvars['node-1'].railforge_hw.rails }}"}}],
        },
    ]
    (tmp_path / "seam.yml").write_text(yaml.safe_dump(plays))
    result = playbook(tmp_path / "seam.yml", inventory)
    assert result.returncode == 0, result.stdout + result.stderr
    assert messages(result.stdout) == {"localhost": RAILS}, result.stdout


def cluster(tmp_path: Path, node: dict) -> Path:
    """A small valid inventory: gpu-1 is the node read (as given), gpu-2's facts are set by hand."""
    inventory = tmp_path / "inventory" / "hosts.yml"
    inventory.parent.mkdir(exist_ok=True)
    hand_set = {"ansible_host": "127.0.0.3", "railforge_hw_source": "inventory", "railforge_hw": HAND_SET}
    hosts = {
        "all": {
            "vars": {
                "railforge_cluster_name": "facts",
                "railforge_gpu_count": 4,
                "versions_railforge_scheduler_registry": "registry.test.internal/railforge",
            },
            "children": {
                "k8s_cluster": {
                    "children": {
                        "kube_control_plane": {"hosts": {"cp-1": {"ansible_host": "127.0.0.2"}}},
                        "kube_node": {"hosts": {"gpu-1": node, "gpu-2": hand_set}},
                    }
                },
                "gpu_nodes": {"hosts": {"gpu-1": None, "gpu-2": None}},
            },
        }
    }
    inventory.write_text(yaml.safe_dump(hosts))
    return inventory


LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
UNREACHABLE = {"ansible_host": "127.0.0.4"}
# validate.yml's hardware_facts tag: the pre-flight, the facts play, then each node's facts' warnings; no cluster.
VALIDATE = ROOT / "playbooks/validate.yml"


def test_the_facts_are_kept_and_loaded_when_no_node_is_read(tmp_path):
    gathered = playbook(VALIDATE, cluster(tmp_path, LOCAL), "--tags", "hardware_facts")
    output = gathered.stdout + gathered.stderr
    assert gathered.returncode == 0, output
    kept = tmp_path / "inventory/artifacts/hw/gpu-1.json"
    facts = json.loads(kept.read_text())
    assert {"gpus", "hcas", "rails", "warnings"} <= set(facts) and oct(kept.stat().st_mode & 0o777) == "0o644"
    # the hand-set host is never read nor kept
    assert sorted(p.name for p in kept.parent.iterdir()) == ["gpu-1.json"] and "UNREACHABLE" not in output
    expected = {"gpu-1": facts["warnings"] or ["hardware facts: no fallback taken, nothing left unreconciled"]}
    assert messages(output) == {**expected, "gpu-2": ["set by hand"]}

    # Later, without reading the nodes (gpu-1 now unreachable): the kept facts are loaded, no host is tried.
    later = cluster(tmp_path, UNREACHABLE)
    loaded = playbook(VALIDATE, later, "--tags", "hardware_facts", "--skip-tags", "gather_hardware_facts")
    output = loaded.stdout + loaded.stderr
    assert loaded.returncode == 0, output
    assert "UNREACHABLE" not in output
    assert messages(output) == {**expected, "gpu-2": ["set by hand"]}


def test_a_node_without_facts_is_named_with_the_command_that_gathers_them(tmp_path):
    inventory = cluster(tmp_path, UNREACHABLE)
    result = playbook(ROOT / "playbooks/network.yml", inventory, "--skip-tags=gather_hardware_facts")
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2, output
    assert (
        f"no hardware facts of gpu-1: not read in this run and none kept in {inventory.parent}/artifacts/hw. "
        f"Gather them with ansible-playbook -i {inventory} playbooks/facts.yml --limit gpu-1"
    ) in output
    assert "UNREACHABLE" not in output and "TASK [rail_networks" not in output


def test_check_mode_reads_the_facts_but_keeps_no_file(tmp_path):
    result = playbook(VALIDATE, cluster(tmp_path, LOCAL), "--tags", "hardware_facts", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(messages(result.stdout)) == {"gpu-1", "gpu-2"}
    assert not (tmp_path / "inventory/artifacts").exists()
