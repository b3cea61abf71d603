"""playbooks/benchmark.yml's CPU fallback end to end on the test bed: the real API server, the real node, the real
mpi-operator gang-scheduling with railforge, the lab's OpenMPI image. The playbook renders the MPIJob, applies it
server-side, follows it to its end, reads the launcher's log and writes the report; an impossible floor fails the
run naming the floor.

The test bed has no cluster DNS (no CoreDNS, pods have no route off the node's bridge), so this test plays it for
the launcher: once the workers run, their job names (the hostfile's <pod>.<job>.<namespace>.svc) go into the
launcher's /etc/hosts, the file the kubelet keeps for the pod. Everything else is what a cluster does.
"""

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from conftest import ROOT
from kubernetes import client

NAMESPACE = "bench-e2e"
JOB = "railforge-bench"
ELEMENTS = 65536  # 512 KiB per rank
PODMAN_ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "molecule/containers.conf")}


@pytest.fixture(scope="module")
def openmpi_image(node, tmp_path_factory):
    """The lab's OpenMPI image (deploy/openmpi/build.sh), imported into the node's containerd."""
    archive = tmp_path_factory.mktemp("openmpi") / "openmpi.tar"
    built = subprocess.run(
        [ROOT / "deploy/openmpi/build.sh"],
        capture_output=True,
        text=True,
        env={**PODMAN_ENV, "RAILFORGE_OPENMPI_ARCHIVE": str(archive)},
        timeout=900,
    )
    assert built.returncode == 0, built.stderr
    node.ctr("images", "import", str(archive))
    return built.stdout.strip().splitlines()[-1]


def play_dns(plane, node, stop: threading.Event) -> None:
    """Until ``stop``: write each running worker's job name into the launcher's hosts file (see the docstring)."""
    core = client.CoreV1Api(plane.api)
    written: set[tuple[str, str]] = set()
    while not stop.is_set():
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"training.kubeflow.org/job-name={JOB}").items
        launchers = [p for p in pods if p.metadata.labels.get("training.kubeflow.org/job-role") == "launcher"]
        workers = [p for p in pods if p.metadata.labels.get("training.kubeflow.org/job-role") == "worker"]
        for launcher in launchers:
            hosts = node.directory / "kubelet/pods" / launcher.metadata.uid / "etc-hosts"
            for worker in workers:
                key = (launcher.metadata.uid, worker.metadata.name)
                if worker.status.pod_ip and hosts.exists() and key not in written:
                    with hosts.open("a") as file:
                        file.write(f"{worker.status.pod_ip}\t{worker.metadata.name}.{JOB}.{NAMESPACE}.svc\n")
                    written.add(key)
        stop.wait(0.5)


def benchmark(plane, node, tmp_path, **variables) -> subprocess.CompletedProcess:
    """ansible-playbook playbooks/benchmark.yml in mode cpu on the real node, the DNS played meanwhile."""
    extra = {
        "railforge_cluster_name": "testbed",
        "railforge_benchmark_mode": "cpu",
        "railforge_benchmark_kubeconfig": str(plane.admin_kubeconfig),
        "railforge_benchmark_nodes": [node.name],
        "railforge_benchmark_workers": 2,  # one node: both workers there, MPI between two pods over its bridge
        "railforge_benchmark_namespace": NAMESPACE,
        "railforge_benchmark_allreduce_elements": ELEMENTS,
        "railforge_benchmark_timeout": 150,
        "railforge_benchmark_results": str(tmp_path / "results"),
        "railforge_benchmark_reports": str(tmp_path / "reports"),
        **variables,
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "vars.json").write_text(json.dumps(extra))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    env["ANSIBLE_SSH_ARGS"] = "-o ProxyCommand=false"
    command = [str(os.path.join(os.path.dirname(sys.executable), "ansible-playbook")), "-i", "localhost,"]
    command += ["playbooks/benchmark.yml", f"--extra-vars=@{tmp_path / 'vars.json'}"]
    stop = threading.Event()
    dns = threading.Thread(target=play_dns, args=(plane, node, stop), daemon=True)
    dns.start()
    try:
        return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=400)
    finally:
        stop.set()
        dns.join(5)


def test_the_cpu_fallback_runs_end_to_end_and_an_impossible_floor_fails_by_name(
    control_plane, node, mpi_operator, run_scheduler, openmpi_image, tmp_path
):
    run_scheduler(
        {
            "scheduler_name": "railforge",
            "node_selector": f"kubernetes.io/hostname={node.name}",
            "leader_election": {"enabled": False},
        }
    )
    started = time.monotonic()
    passed = benchmark(control_plane, node, tmp_path / "first")
    first_seconds = time.monotonic() - started
    output = passed.stdout + passed.stderr
    assert passed.returncode == 0, output[-6000:]
    (report,) = (tmp_path / "first/reports").glob("benchmark-testbed-*.json")
    document = json.loads(report.read_text())
    assert document["jobs"]["mpijob"]["state"] == "Succeeded"
    pods = document["jobs"]["mpijob"]["pods"]
    assert sorted(pods)[-2:] == [f"{JOB}-worker-0", f"{JOB}-worker-1"] and set(pods.values()) == {node.name}
    (run,) = document["results"]["mpi"]
    assert [(rank["pod"], rank["node"], rank["ok"]) for rank in run["ranks"]] == [
        (f"{JOB}-worker-{index}", node.name, True) for index in range(2)
    ]
    assert run["size_bytes"] == ELEMENTS * 8 and run["busbw_gbps"] > 0 and run["ok"]
    (verdict,) = [v for v in document["verdicts"] if v["check"] == "mpi_allreduce"]
    assert verdict["status"] == "info" and verdict["measured"] == run["busbw_gbps"]  # no floor by default
    assert document["nodes"][node.name]["verdict"] == "info" and document["failed"] == []
    assert report.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert f"| MPIJob {JOB} | Succeeded |" in report.with_suffix(".md").read_text()
    # the pods were bound by railforge, as a gang
    launcher = next(p for p in pods if "launcher" in p)
    bound = client.CoreV1Api(control_plane.api).read_namespaced_pod(launcher, NAMESPACE)
    assert bound.spec.scheduler_name == "railforge"

    impossible = {"busbw_gbps": 99999, "message_bytes": ELEMENTS * 8, "source": "impossible: the test bed's floor"}
    floor = {"cpu-fallback": {"floors": {"mpi_allreduce": impossible}}}
    started = time.monotonic()
    failed = benchmark(control_plane, node, tmp_path / "second", railforge_benchmark_floors=floor)
    second_seconds = time.monotonic() - started
    output = " ".join((failed.stdout + failed.stderr).split())
    assert failed.returncode == 2, output[-6000:]
    assert "mpi_allreduce 2x1: " in output and "GB/s bus bandwidth at 512 KiB < 99999 GB/s floor" in output
    (report,) = (tmp_path / "second/reports").glob("benchmark-testbed-*.json")
    assert json.loads(report.read_text())["failed"][0].endswith("< 99999 GB/s floor")
    print(f"benchmark.yml on the test bed: {first_seconds:.1f} s passing, {second_seconds:.1f} s failing")
