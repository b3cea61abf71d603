"""The rolling reboot of playbooks/nodes.yml, run for real: `ansible-playbook playbooks/nodes.yml --tags node_reboot`
against throw-away Podman containers of the test image (connection containers.podman.podman, no network), whose
Kubernetes Nodes are API-only Nodes of the test bed's real API server, drained and uncordoned by the real kubectl.

A container cannot reboot, so node_reboot_command stands for the reboot: it records when it ran and clears
/run/reboot-required.pkgs as a real reboot clears /run. Everything else is the playbook as operators run it: the
inventory check, batches (railforge_serial), max_fail_percentage, the reasons left in /run by an earlier run, the
cordon, drain, checks after the reboot and the uncordon. What is asserted is what the API server saw (a watch on
the Nodes' spec.unschedulable) and what the containers hold afterwards.
"""

import contextlib
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client, watch
from urllib3.exceptions import ProtocolError

from railforge.testbed.build import binary
from railforge.testbed.controlplane import add_api_node

ROOT = Path(__file__).resolve().parents[2]
MARKER = "/var/tmp/railforge-rebooted"
# Stands for the reboot: when it ran, and /run cleared of the reasons as a real reboot clears it.
REBOOT_COMMAND = f"sh -c 'date +%s.%N >> {MARKER} && rm -f /run/reboot-required /run/reboot-required.pkgs'"
# The Molecule scenarios' node image, built by the setup.
NODE_IMAGE = (ROOT / "molecule/image/TAG").read_text().strip()
LEFT_OVER_REASON = "railforge-gpudirect (kernel command line)"


@pytest.fixture
def hosts(control_plane):
    """Four containers and four API-only Nodes of the same names: one control-plane host, three workers."""
    prefix = f"rb{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-cp0", f"{prefix}-n1", f"{prefix}-n2", f"{prefix}-n3"]
    core = client.CoreV1Api(control_plane.api)
    try:
        for name in names:
            subprocess.run(
                ["podman", "run", "--detach", "--rm", "--name", name, "--hostname", name, "--network=none",
                 "--runtime=runc", "--ulimit=nofile=4096:4096", "--ulimit=nproc=4096:4096", NODE_IMAGE,
                 "sleep", "infinity"],
                check=True, capture_output=True,
            )  # fmt: skip
            add_api_node(control_plane, name, {"cpu": "8", "memory": "64Gi"}, labels={"railforge.test/pool": prefix})
        yield names
    finally:
        subprocess.run(["podman", "rm", "--force", "--time=0", *names], capture_output=True, check=False)
        for name in names:
            with contextlib.suppress(client.ApiException):
                core.delete_node(name)


def inventory(tmp_path: Path, plane, names: list[str], host_vars: dict | None = None) -> Path:
    control_plane, *workers = names
    hosts = {
        "all": {
            "vars": {
                "railforge_cluster_name": "reboot-test",
                # the pre-flight checks the whole inventory: where the scheduler's image would come from (not used)
                "versions_railforge_scheduler_registry": "registry.test.internal/railforge",
                "railforge_serial": 2,
                "ansible_connection": "containers.podman.podman",
                "ansible_python_interpreter": "/usr/bin/python3",
                "common_manage_etc_hosts": False,
                "node_reboot_kubeconfig": str(plane.admin_kubeconfig),
                "node_reboot_kubectl": binary("kubectl"),
                "node_reboot_command": REBOOT_COMMAND,
            },
            "children": {
                "kube_control_plane": {"hosts": {control_plane: (host_vars or {}).get(control_plane, {})}},
                "kube_node": {"hosts": {name: (host_vars or {}).get(name, {}) for name in workers}},
            },
        }
    }
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(hosts))
    return path


def leave_reason(name: str) -> None:
    """What gpudirect's handler leaves when an earlier run changed the kernel command line but did not reboot."""
    subprocess.run(
        ["podman", "exec", name, "sh", "-c", f"echo '{LEFT_OVER_REASON}' > /run/reboot-required.pkgs"], check=True
    )


def reboots(name: str) -> list[float]:
    result = subprocess.run(["podman", "exec", name, "cat", MARKER], capture_output=True, text=True, check=False)
    return [float(line) for line in result.stdout.split()]


class Schedulability:
    """Every change of spec.unschedulable of the pool's Nodes, as the API server's watch delivers it."""

    def __init__(self, plane, pool: str):
        self.changes: list[tuple[float, str, bool]] = []
        self._watch = watch.Watch()
        core = client.CoreV1Api(plane.api)
        nodes = core.list_node(label_selector=f"railforge.test/pool={pool}")
        # Each Node's state when the watch starts: only changes from it count.
        self._state = {node.metadata.name: bool(node.spec.unschedulable) for node in nodes.items}
        start = nodes.metadata.resource_version
        self._thread = threading.Thread(target=self._follow, args=(core, pool, start), daemon=True)
        self._thread.start()

    def _follow(self, core, pool: str, start: str) -> None:
        with contextlib.suppress(ProtocolError):  # stop() closes the stream under the reader
            self._read(core, pool, start)

    def _read(self, core, pool: str, start: str) -> None:
        stream = self._watch.stream(
            core.list_node, label_selector=f"railforge.test/pool={pool}", resource_version=start, timeout_seconds=600
        )
        for event in stream:
            node = event["object"]
            unschedulable = bool(node.spec.unschedulable)
            if self._state.get(node.metadata.name, False) != unschedulable:
                self.changes.append((time.time(), node.metadata.name, unschedulable))
            self._state[node.metadata.name] = unschedulable

    def of(self, name: str) -> list[bool]:
        return [state for _, node, state in self.changes if node == name]

    def stop(self) -> None:
        time.sleep(1)  # the last events are on their way
        self._watch.stop()


def run_nodes(inventory_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "RAILFORGE_REPORTS_DIR": str(inventory_path.parent / "reports"),
    }
    return subprocess.run(
        ["ansible-playbook", "-i", str(inventory_path), str(ROOT / "playbooks/nodes.yml"), "--tags", "node_reboot",
         *args],
        capture_output=True, text=True, env=env, cwd=ROOT, check=False,
    )  # fmt: skip


def unschedulable(plane, name: str) -> bool:
    return bool(client.CoreV1Api(plane.api).read_node(name).spec.unschedulable)


def test_each_batch_is_drained_rebooted_once_and_uncordoned_before_the_next(tmp_path, control_plane, hosts):
    for name in hosts:
        leave_reason(name)
    # An operator's own cordon is kept: the node is drained and rebooted, and left cordoned.
    operator_cordoned = hosts[3]
    client.CoreV1Api(control_plane.api).patch_node(operator_cordoned, {"spec": {"unschedulable": True}})
    # One node also has a reason collected in this run whose check passes after the reboot: one reboot for both.
    checked = {hosts[1]: {"node_reboot_reasons": [{"reason": "test", "verify_command": f"cat {MARKER}",
                                                  "verify_expect": "."}]}}  # fmt: skip
    seen = Schedulability(control_plane, hosts[0].split("-")[0])
    result = run_nodes(inventory(tmp_path, control_plane, hosts, checked))
    seen.stop()
    output = " ".join((result.stdout + result.stderr).split())  # the callback wraps long lines
    assert result.returncode == 0, output

    for name in hosts:
        assert len(reboots(name)) == 1, name  # once, for all its reasons
    for name in hosts[:3]:
        assert seen.of(name) == [True, False], (name, seen.changes)
        assert not unschedulable(control_plane, name)
    # Kept: never uncordoned, cordoned at the end.
    assert False not in seen.of(operator_cordoned) and unschedulable(control_plane, operator_cordoned)

    # Batches of two, in order: the first batch is back in service before the second is cordoned.
    first_batch_uncordoned = max(t for t, node, state in seen.changes if node in hosts[:2] and not state)
    second_batch_cordoned = min(t for t, node, state in seen.changes if node == hosts[2] and state)
    assert first_batch_uncordoned < second_batch_cordoned
    assert max(reboots(hosts[0]) + reboots(hosts[1])) < min(reboots(hosts[2]) + reboots(hosts[3]))

    # The reasons are gone with the reboot: a second run reboots nothing and touches no Node.
    seen = Schedulability(control_plane, hosts[0].split("-")[0])
    again = run_nodes(inventory(tmp_path, control_plane, hosts))
    seen.stop()
    assert again.returncode == 0, again.stdout + again.stderr
    assert all(len(reboots(name)) == 1 for name in hosts)
    assert seen.changes == []


def test_a_failed_check_after_the_reboot_keeps_the_node_cordoned_and_stops_the_rollout(tmp_path, control_plane, hosts):
    for name in hosts:
        leave_reason(name)
    failing = {hosts[1]: {"node_reboot_reasons": [{"reason": "driver", "verify_command": "cat /proc/version",
                                                  "verify_expect": "580.95.05"}]}}  # fmt: skip
    result = run_nodes(inventory(tmp_path, control_plane, hosts, failing))
    output = " ".join((result.stdout + result.stderr).split())  # the callback wraps long lines
    assert result.returncode != 0, output
    assert "expected it to contain 580.95.05. ; the node stays cordoned" in output
    assert unschedulable(control_plane, hosts[1])
    assert not unschedulable(control_plane, hosts[0])  # its batch mate passed and is back in service
    # max_fail_percentage 0: the second batch is never started.
    for name in hosts[2:]:
        assert reboots(name) == [] and not unschedulable(control_plane, name)


def test_without_a_cluster_the_node_is_rebooted_undrained_with_one_line(tmp_path, control_plane, hosts):
    leave_reason(hosts[1])
    path = inventory(tmp_path, control_plane, hosts)
    result = run_nodes(path, "-e", "node_reboot_kubeconfig=''", "--limit", hosts[1])
    output = " ".join((result.stdout + result.stderr).split())  # the callback wraps long lines
    assert result.returncode == 0, output
    assert "no Kubernetes cluster (no node_reboot_kubeconfig, no /etc/kubernetes/admin.conf on the first" in output
    assert len(reboots(hosts[1])) == 1 and reboots(hosts[0]) == []


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--check"], "check mode: it would be drained and rebooted"),
        (["-e", '{"node_reboot_enabled": false}'], "not rebooted: node_reboot_enabled is false"),
        (["-e", '{"node_reboot_command": ""}'], "a container shares the kernel of its host and is not rebooted"),
    ],
    ids=["check-mode", "disabled", "container"],
)
def test_a_pending_reboot_that_is_not_done_is_said_in_one_line(tmp_path, control_plane, hosts, args, line):
    leave_reason(hosts[1])
    result = run_nodes(inventory(tmp_path, control_plane, hosts), "--limit", hosts[1], *args)
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 0, output
    assert f"node_reboot: {hosts[1]}: reboot pending ({LEFT_OVER_REASON}); {line}" in output
    assert f"needs attention: reboot pending: {LEFT_OVER_REASON}" in output  # the run's summary
    assert reboots(hosts[1]) == [] and not unschedulable(control_plane, hosts[1])
