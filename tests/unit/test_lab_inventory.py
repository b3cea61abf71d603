"""The lab's inventory (railforge.labinventory): the example inventory cut to the lab's hosts plus the overlay, and
nothing else. Ansible reads both (ansible-inventory), so what is compared is what a playbook sees."""

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from railforge.cli import main
from railforge.cliargs import UsageError
from railforge.labinventory import ALLOWED, EXAMPLE, OVERLAY, generate

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_SSH_ARGS": "-o ProxyCommand=false"}
# Where a host's vars say it was read from: the lab's files, not the example's.
SOURCE_VARS = {"inventory_file", "inventory_dir"}


def inventory(*sources: Path) -> dict:
    listed = subprocess.run(
        ["ansible-inventory", *(f"-i{source}" for source in sources), "--list"],
        capture_output=True, text=True, env=ENV, cwd=ROOT, check=True,
    )  # fmt: skip
    return json.loads(listed.stdout)


def members(listed: dict, group: str) -> set[str]:
    entry = listed.get(group, {})
    return set(entry.get("hosts", [])).union(*(members(listed, child) for child in entry.get("children", [])))


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lab")
    generate(out)
    return out


def test_the_lab_runs_the_examples_hosts_with_the_examples_variables_but_what_may_differ(lab):
    example, ours = inventory(EXAMPLE / "hosts.yml"), inventory(lab / "hosts.yml")
    overlay = yaml.safe_load(OVERLAY.read_text())
    hosts = set(ours["_meta"]["hostvars"])
    assert hosts == set(overlay["hosts"])
    for host in hosts:
        theirs, mine = example["_meta"]["hostvars"][host], ours["_meta"]["hostvars"][host]
        differing = {name for name in theirs.keys() | mine.keys() if theirs.get(name) != mine.get(name)}
        assert differing - SOURCE_VARS <= ALLOWED, (host, sorted(differing - SOURCE_VARS - ALLOWED))
        assert "railforge_hw" not in mine
    groups = {name for name in example if name != "_meta"}
    assert {name for name in ours if name != "_meta"} == groups
    for group in groups:  # every group keeps its members, cut to the lab's hosts
        assert members(ours, group) == members(example, group) & hosts, group
    # what the example says reaches the lab: its cluster name, rails and GPU shape, not only what was checked above
    dgx = ours["_meta"]["hostvars"]["dgx-01"]
    assert (dgx["railforge_cluster_name"], dgx["railforge_gpu_count"], len(dgx["rail_networks_cidrs"])) == (
        "forge-a", 8, 8
    )  # fmt: skip


def test_scale_hosts_complete_the_examples_control_planes(lab):
    both = inventory(lab / "hosts.yml", lab / "scale.yml")
    assert members(both, "kube_control_plane") == members(inventory(EXAMPLE / "hosts.yml"), "kube_control_plane")
    assert both["_meta"]["hostvars"]["cp-02"]["ansible_ssh_private_key_file"] == "/run/railforge-lab/ssh/id_ed25519"


def test_the_generated_inventory_passes_the_pre_flight(lab):
    result = subprocess.run(
        ["ansible-playbook", "-i", str(lab / "hosts.yml"), str(ROOT / "playbooks/preflight.yml")],
        capture_output=True, text=True, env=ENV, cwd=ROOT, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]


def overlay_with(tmp_path: Path, change) -> Path:
    overlay = yaml.safe_load(OVERLAY.read_text())
    change(overlay)
    path = tmp_path / "overlay.yml"
    path.write_text(yaml.safe_dump(overlay))
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda o: o["vars"].update(railforge_hw={"rails": []}),
            "vars: railforge_hw is not something the lab may change from the example",
        ),
        (
            lambda o: o["hosts"]["dgx-01"].update(railforge_gpu_count=2),
            "hosts: dgx-01: railforge_gpu_count is not something the lab may change from the example",
        ),
        (
            lambda o: o["vars"].update(rail_networks_cidrs=["10.99.0.0/24"]),
            "vars: rail_networks_cidrs is not something the lab may change",
        ),
        (lambda o: o["hosts"].update({"lab-extra": {}}), "hosts: lab-extra is not a host of the example inventory"),
        (lambda o: o["scale_hosts"].update({"dgx-01": {}}), "dgx-01 in both hosts and scale_hosts"),
        (lambda o: o.update(hosts={}), "hosts names no host of the example to run"),
    ],
    ids=["hardware-facts", "host-gpu-count", "rail-ranges", "unknown-host", "host-twice", "no-hosts"],
)
def test_an_overlay_that_changes_anything_else_is_refused_before_anything_is_written(tmp_path, change, message):
    out = tmp_path / "out"
    with pytest.raises(UsageError, match=message):
        generate(out, overlay_path=overlay_with(tmp_path, change))
    assert not out.exists()


def test_machine_vars_are_held_to_the_same_rule(tmp_path):
    machine = tmp_path / "vars.yml"
    machine.write_text(yaml.safe_dump({"kubernetes_apt_repo_key_fingerprint": "A" * 40, "kubernetes_version": "1"}))
    with pytest.raises(UsageError, match=f"{machine}: kubernetes_version is not something the lab may change"):
        generate(tmp_path / "out", machine_vars=machine)
    machine.write_text(yaml.safe_dump({"kubernetes_apt_repo_key_fingerprint": "A" * 40}))
    generate(tmp_path / "out", machine_vars=machine)
    all_vars = yaml.safe_load((tmp_path / "out/group_vars/all.yml").read_text())
    assert all_vars["kubernetes_apt_repo_key_fingerprint"] == "A" * 40


def test_an_inventory_with_machine_vars_is_not_rewritten_without_them(tmp_path):
    machine = tmp_path / "vars.yml"
    machine.write_text(yaml.safe_dump({"kubernetes_apt_repo_key_fingerprint": "A" * 40}))
    all_yml = tmp_path / "out/group_vars/all.yml"
    generate(tmp_path / "out", machine_vars=machine)
    written = all_yml.read_text()
    with pytest.raises(UsageError, match=f"all.yml holds the machine vars of {machine}: pass --machine-vars {machine}"):
        generate(tmp_path / "out")
    assert all_yml.read_text() == written
    generate(tmp_path / "out", machine_vars=machine)
    assert all_yml.read_text() == written


def test_a_value_an_example_group_outranks_is_refused(tmp_path):
    """gpudirect_gdrcopy_source is set by the example's rdma_nodes group: the overlay's all-group value would lose."""
    example = tmp_path / "example"
    (example / "group_vars/rdma_nodes").mkdir(parents=True)
    (example / "hosts.yml").write_text((EXAMPLE / "hosts.yml").read_text())
    (example / "group_vars/rdma_nodes/rdma.yml").write_text("doca_ofed_version: '3.0.0'\n")
    with pytest.raises(UsageError, match="the example's group rdma_nodes sets doca_ofed_version"):
        generate(tmp_path / "out", example=example)


def test_the_command_refuses_in_one_line_and_writes_nothing(tmp_path, capsys):
    overlay = overlay_with(tmp_path, lambda o: o["hosts"]["cp-01"].update(railforge_hw={}, railforge_rdma_hcas=[]))
    assert main(["lab", "inventory", "--overlay", str(overlay), "--out", str(tmp_path / "out")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "hosts: cp-01: railforge_hw, railforge_rdma_hcas are not something the lab may change" in line
    assert not (tmp_path / "out").exists()


def test_machine_vars_that_are_not_a_mapping_are_refused_as_such(tmp_path):
    machine = tmp_path / "vars.yml"
    machine.write_text("- kubernetes_apt_repo_key_fingerprint\n")
    with pytest.raises(UsageError, match=f"{machine}: expected a mapping of names to values, got a list"):
        generate(tmp_path / "out", machine_vars=machine)
