"""playbooks/benchmark.yml's CPU fallback end to end on the test bed: the real API server, the real node, the real
mpi-operator gang-scheduling with railforge, the lab's OpenMPI image and the ResNet-50 image. The playbook renders the
two MPIJobs (allreduce, and ResNet-50 training over Gloo), applies them server-side, follows them to their end, reads
the launchers' logs and writes the report. A second run, through playbooks/validate.yml, has an impossible floor:
validate runs the benchmark, joins its report with the node checks (here of localhost, whose sshd is absent: they
fail, a row of their own) and fails after its table, which names the floor on the test bed node's row; the node is
quarantined (then released by the test).

The test bed has no cluster DNS (no CoreDNS, pods have no route off the node's bridge), so this test plays it for
each launcher: once the workers run, their job names (the hostfile's <pod>.<job>.<namespace>.svc) go into the
launcher's /etc/hosts, the file the kubelet keeps for the pod. Everything else is what a cluster does.
"""

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from conftest import ROOT, TESTBED_INVENTORY
from kubernetes import client

from railforge.cli import main

NAMESPACE = "bench-e2e"
JOB = "railforge-bench"
ELEMENTS = 65536  # 512 KiB per rank
PODMAN_ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "molecule/containers.conf")}


@pytest.fixture(scope="module")
def job_images(control_plane, node, tmp_path_factory):
    """The OpenMPI and the ResNet-50 images (deploy/openmpi/build.sh), imported into the node's containerd and
    listed in the node's status (the benchmark reads them there; the kubelet refreshes it within about 40 s)."""
    names = []
    for target in ("openmpi", "resnet50"):
        archive = tmp_path_factory.mktemp(target) / f"{target}.tar"
        built = subprocess.run(
            [ROOT / "deploy/openmpi/build.sh", target],
            capture_output=True,
            text=True,
            env={**PODMAN_ENV, "RAILFORGE_IMAGE_ARCHIVE": str(archive)},
            timeout=900,
        )
        assert built.returncode == 0, built.stderr
        node.ctr("images", "import", str(archive))
        archive.unlink()
        names.append(built.stdout.strip().splitlines()[-1])
    core = client.CoreV1Api(control_plane.api)
    deadline = time.monotonic() + 120
    while not set(names) <= (listed := node_images(core, node.name)) and time.monotonic() < deadline:
        time.sleep(2)
    assert set(names) <= listed, (names, listed)
    return names


def node_images(core, name: str) -> set[str]:
    return {image for entry in core.read_node(name).status.images or [] for image in entry.names or []}


def play_dns(plane, node, stop: threading.Event) -> None:
    """Until ``stop``: write each running worker's job name into the launcher's hosts file (see the docstring)."""
    core = client.CoreV1Api(plane.api)
    written: set[tuple[str, str]] = set()
    while not stop.is_set():
        pods = core.list_namespaced_pod(NAMESPACE, label_selector="training.kubeflow.org/job-name").items
        launchers = [p for p in pods if p.metadata.labels.get("training.kubeflow.org/job-role") == "launcher"]
        workers = [p for p in pods if p.metadata.labels.get("training.kubeflow.org/job-role") == "worker"]
        for launcher in launchers:
            job = launcher.metadata.labels["training.kubeflow.org/job-name"]
            hosts = node.directory / "kubelet/pods" / launcher.metadata.uid / "etc-hosts"
            for worker in workers:
                key = (launcher.metadata.uid, worker.metadata.name)
                ours = worker.metadata.labels["training.kubeflow.org/job-name"] == job
                if ours and worker.status.pod_ip and hosts.exists() and key not in written:
                    with hosts.open("a") as file:
                        file.write(f"{worker.status.pod_ip}\t{worker.metadata.name}.{job}.{NAMESPACE}.svc\n")
                    written.add(key)
        stop.wait(0.5)


def benchmark(plane, node, tmp_path, playbook="playbooks/benchmark.yml", **variables) -> subprocess.CompletedProcess:
    """ansible-playbook PLAYBOOK (benchmark.yml, or validate.yml which runs it) in mode cpu on the real node, the
    DNS played meanwhile."""
    extra = {
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
    command += ["-i", str(TESTBED_INVENTORY[0]), playbook, f"--extra-vars=@{tmp_path / 'vars.json'}"]
    stop = threading.Event()
    dns = threading.Thread(target=play_dns, args=(plane, node, stop), daemon=True)
    dns.start()
    try:
        return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=400)
    finally:
        stop.set()
        dns.join(5)


def test_the_cpu_fallback_runs_end_to_end_and_an_impossible_floor_fails_by_name(
    control_plane, node, mpi_operator, run_scheduler, job_images, tmp_path
):
    run_scheduler(
        {
            "scheduler_name": "railforge",
            "node_selector": f"kubernetes.io/hostname={node.name}",
            "leader_election": {"enabled": False},
        }
    )
    started = time.monotonic()
    passed = benchmark(control_plane, node, tmp_path / "first", railforge_benchmark_resnet_scaling=[1])
    first_seconds = time.monotonic() - started
    output = passed.stdout + passed.stderr
    assert passed.returncode == 0, output[-6000:]
    (report,) = (tmp_path / "first/reports").glob("benchmark-testbed-*.json")
    document = json.loads(report.read_text())
    allreduce, resnet, resnet_one = document["jobs"]["mpijobs"]
    assert (allreduce["name"], resnet["name"], resnet_one["name"]) == (JOB, f"{JOB}-resnet50", f"{JOB}-resnet50-w1")
    assert {job["state"] for job in (allreduce, resnet, resnet_one)} == {"Succeeded"}
    pods = allreduce["pods"]
    assert sorted(pods)[-2:] == [f"{JOB}-worker-0", f"{JOB}-worker-1"] and set(pods.values()) == {node.name}
    (run,) = document["results"]["mpi"]
    assert [(rank["pod"], rank["node"], rank["ok"]) for rank in run["ranks"]] == [
        (f"{JOB}-worker-{index}", node.name, True) for index in range(2)
    ]
    assert run["size_bytes"] == ELEMENTS * 8 and run["busbw_gbps"] > 0 and run["ok"]
    (verdict,) = [v for v in document["verdicts"] if v["check"] == "mpi_allreduce"]
    assert verdict["status"] == "info" and verdict["measured"] == run["busbw_gbps"]  # no floor by default
    # ResNet-50 trained on both ranks, its gradients all-reduced by DDP over Gloo between the two pods
    trained, alone = sorted(document["results"]["resnet"], key=lambda run: -run["result"]["ranks"])
    result = trained["result"]
    assert (result["device"], result["ranks"], result["nodes"], result["steps"]) == ("cpu", 2, 1, 5)
    assert len(trained["steps"]) == 5 and trained["result"]["images_per_sec"] > 0
    assert (alone["result"]["ranks"], alone["result"]["steps"]) == (1, 5)
    verdicts = [v for v in document["verdicts"] if v["check"] == "resnet50"]
    assert sorted(v["measured"] for v in verdicts) == sorted(r["result"]["images_per_sec"] for r in (trained, alone))
    # the scaling series: 2 ranks against 1, judged as information (the CPU fallback has no floor)
    (scaling,) = [v for v in document["verdicts"] if v["check"] == "resnet50_scaling"]
    per_rank = (result["images_per_sec"] / 2) / alone["result"]["images_per_sec"]
    assert scaling["status"] == "info" and scaling["measured"] == pytest.approx(per_rank, abs=1e-4)
    assert "## ResNet-50 scaling" in report.with_suffix(".md").read_text()
    assert document["nodes"][node.name]["verdict"] == "info" and document["failed"] == []
    assert report.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert f"| MPIJob {JOB} | Succeeded |" in report.with_suffix(".md").read_text()
    assert f"| MPIJob {JOB}-resnet50 | Succeeded |" in report.with_suffix(".md").read_text()
    # the pods were bound by railforge, as a gang
    for job in (allreduce, resnet, resnet_one):
        launcher = next(p for p in job["pods"] if "launcher" in p)
        bound = client.CoreV1Api(control_plane.api).read_namespaced_pod(launcher, NAMESPACE)
        assert bound.spec.scheduler_name == "railforge"

    impossible = {"busbw_gbps": 99999, "message_bytes": ELEMENTS * 8, "source": "impossible: the test bed's floor"}
    floor = {"cpu-fallback": {"floors": {"mpi_allreduce": impossible}}}
    started = time.monotonic()
    # the allreduce alone this time (no ResNet-50 image named), through validate.yml
    failed = benchmark(
        control_plane,
        node,
        tmp_path / "second",
        "playbooks/validate.yml",
        railforge_benchmark_floors=floor,
        railforge_benchmark_resnet_image="",
        railforge_validate_report=str(tmp_path / "second/validate.json"),
        ansible_connection="local",  # validate's hardware-facts play runs on every host: here localhost
        ansible_python_interpreter=sys.executable,
    )
    second_seconds = time.monotonic() - started
    output = " ".join((failed.stdout + failed.stderr).split())
    assert failed.returncode == 2, output[-6000:]
    (report,) = (tmp_path / "second/reports").glob("benchmark-testbed-*.json")
    # the first run's ResNet-50 jobs, which this run leaves out, were removed before it started
    left = client.CustomObjectsApi(control_plane.api).list_namespaced_custom_object(
        "kubeflow.org", "v2beta1", NAMESPACE, "mpijobs"
    )
    assert [job["metadata"]["name"] for job in left["items"]] == [JOB]
    (floor_failure,) = json.loads(report.read_text())["failed"]
    assert floor_failure.startswith("mpi_allreduce 2x1: ") and floor_failure.endswith(" < 99999 GB/s floor")
    # the benchmark's own failure waited for validate's table, which joined the report just written
    assert "fatal: [localhost]: FAILED! => assertion: railforge_validate_result.rc == 0" in output
    validated = json.loads((tmp_path / "second/validate.json").read_text())
    assert validated["benchmark_report"] == str(report)
    row = validated["nodes"][node.name]
    assert row["verdict"] == "FAIL" and row["failed"] == [floor_failure] and row["checks"] is None
    assert f"| {node.name} | - | - | " in output and f"| FAIL | {floor_failure} |" in output
    # the failed node quarantined (nothing new placed there) until released
    try:
        assert f"quarantine: node {node.name} tainted railforge.io/quarantine:NoSchedule ({floor_failure})" in output
        quarantined = client.CoreV1Api(control_plane.api).read_node(node.name)
        assert ("railforge.io/quarantine", "NoSchedule") in {(t.key, t.effect) for t in quarantined.spec.taints or []}
        note = json.loads(quarantined.metadata.annotations["railforge.io/quarantine"])
        assert note["failed"] == [floor_failure] and note["report"] == str(tmp_path / "second/validate.json")
    finally:
        assert main(["node", "release", node.name, "--kubeconfig", str(control_plane.admin_kubeconfig)]) == 0
    released = client.CoreV1Api(control_plane.api).read_node(node.name)
    assert "railforge.io/quarantine" not in {t.key for t in released.spec.taints or []}
    print(f"benchmark.yml on the test bed: {first_seconds:.1f} s passing, {second_seconds:.1f} s failing")
