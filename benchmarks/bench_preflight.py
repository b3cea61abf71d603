"""Time the pre-flight (playbooks/preflight.yml) on a generated inventory shaped like inventories/example.

Run: python benchmarks/bench_preflight.py [--nodes 500] [--repeat 3]

The inventory: 3 control planes, NODES - 3 GPU nodes (8 GPUs, 8 InfiniBand rails each, in gpu_nodes, rdma_nodes
and nvswitch_nodes, each with its railforge_topology: 32 nodes per leaf, 8 leaves per spine), rail networks sized
for them, the example's group_vars otherwise. Printed: the wall time of the whole `ansible-playbook` run (what an
operator waits for: Ansible's start, reading the inventory, rendering every host's variables, the check) and the
CPU time that run took (a fair figure on a shared, loaded machine), and the time of validate() alone on the same
variables, each the median of the repeats, with the load average before the first run. The playbook must pass:
a problem in the generated inventory is an error.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
RAILS = 8


def write_inventory(directory: Path, nodes: int) -> Path:
    shutil.copytree(ROOT / "inventories/example/group_vars", directory / "group_vars")
    gpu = [f"gpu-{index:04d}" for index in range(1, nodes - 2)]
    control_plane = {f"cp-{index:02d}": {"ansible_host": f"10.10.0.{10 + index}"} for index in (1, 2, 3)}
    gpu_hosts = {
        name: {
            "ansible_host": f"10.10.{1 + index // 250}.{1 + index % 250}",
            "railforge_topology": {"spine": f"spine-{index // 256:02d}", "leaf": f"leaf-{index // 32:03d}"},
        }
        for index, name in enumerate(gpu)
    }
    listed = {name: None for name in gpu}
    hosts = {
        "all": {
            "children": {
                "kube_control_plane": {"hosts": control_plane},
                "kube_node": {"children": {"gpu_nodes": None}},
                "gpu_nodes": {"hosts": gpu_hosts},
                "nvswitch_nodes": {"hosts": listed},
                "rdma_nodes": {"hosts": listed},
                "k8s_cluster": {"children": {"kube_control_plane": None, "kube_node": None}},
            }
        }
    }
    (directory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    # One /20 per rail: 4094 addresses, enough for the nodes.
    cluster = directory / "group_vars/all/cluster.yml"
    variables = yaml.safe_load(cluster.read_text())
    variables["rail_networks_cidrs"] = [f"10.{200 + rail}.0.0/20" for rail in range(RAILS)]
    cluster.write_text(yaml.safe_dump(variables))
    return directory / "hosts.yml"


def time_playbook(inventory: Path) -> tuple[float, float]:
    """Wall time and CPU time (user + system of ansible-playbook and its children) of one run."""
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_SSH_ARGS": "-o ProxyCommand=false",  # nothing is contacted; were it tried, it fails here
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(
        ["ansible-playbook", "-i", str(inventory), str(ROOT / "playbooks/preflight.yml")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"the pre-flight refused the generated inventory:\n{result.stdout[-4000:]}")
    return elapsed, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def time_validate(inventory: Path) -> float:
    """validate() alone, on the variables ansible-inventory renders for the same inventory."""
    spec = importlib.util.spec_from_file_location(
        "railforge_inventory", ROOT / "plugins/module_utils/railforge_inventory.py"
    )
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)
    listed = subprocess.run(
        ["ansible-inventory", "-i", str(inventory), "--list"],
        capture_output=True,
        text=True,
        env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")},
        check=True,
    )
    data = yaml.safe_load(listed.stdout)
    hostvars = data["_meta"]["hostvars"]

    def hosts_of(group: str) -> list[str]:
        entry = data.get(group, {})
        return sorted({*entry.get("hosts", []), *(h for child in entry.get("children", []) for h in hosts_of(child))})

    groups = {group: hosts_of(group) for group in data if group != "_meta"}
    specs = {}
    for path in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        specs.update(yaml.safe_load(path.read_text())["argument_specs"]["main"]["options"])
    start = time.perf_counter()
    problems = checks.validate(groups, hostvars, specs)
    elapsed = time.perf_counter() - start
    if problems:
        raise SystemExit("validate() found problems:\n" + "\n".join(problems[:10]))
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as directory:
        inventory = write_inventory(Path(directory), args.nodes)
        runs = [time_playbook(inventory) for _ in range(args.repeat)]
        alone = statistics.median(time_validate(inventory) for _ in range(args.repeat))
    wall, cpu = (statistics.median(run[column] for run in runs) for column in (0, 1))
    print("| nodes | preflight.yml wall (s) | its CPU time (s) | validate() alone (s) | load average (1/5/15 min) |")
    print("|---|---|---|---|---|")
    print(f"| {args.nodes} | {wall:.1f} | {cpu:.1f} | {alone:.2f} | {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} |")


if __name__ == "__main__":
    main()
