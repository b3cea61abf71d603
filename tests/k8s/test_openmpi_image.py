"""The lab's OpenMPI job image (deploy/openmpi/build.sh), run the way mpi-operator runs an MPIJob, on Podman instead
of Kubernetes: two workers running sshd as uid 1000 on port 2222 and a launcher running mpirun over ssh, each with
the job's key mounted at sshAuthMountPath as the operator's Secret is (root's files, mode 0644), the hostfile at
/etc/mpi/hostfile and the operator's OMPI_MCA_* environment. All three on a throw-away internal network."""

import os
import re
import secrets
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT

from railforge.lab import RANK_LINE, SUMMARY_LINE

PREFIX = "rf-openmpi-test-"
ELEMENTS = 65536  # 512 KiB per rank
PODMAN_ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "molecule/containers.conf")}
# what mpi-operator v0.8.2 sets in an OpenMPI launcher
OPERATOR_ENV = {
    "K_MPI_JOB_ROLE": "launcher",
    "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
    "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
    "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
}
# non-root and unprivileged, as the MPIJob template asks (securityContext)
HARDENED = ["--user=1000:1000", "--read-only", "--cap-drop=all", "--security-opt=no-new-privileges"]


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["podman", *args], capture_output=True, text=True, env=PODMAN_ENV, timeout=300)
    if check:
        assert result.returncode == 0, f"podman {' '.join(args)}: {result.stderr}"
    return result


@pytest.fixture(scope="module")
def image() -> str:
    result = subprocess.run(
        [ROOT / "deploy/openmpi/build.sh"], capture_output=True, text=True, env=PODMAN_ENV, timeout=900
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def job(image, tmp_path_factory):
    """Two sshd workers and an idle launcher; yields a function that runs a command in the launcher."""
    name = PREFIX + secrets.token_hex(4)
    workers = [f"{name}-worker-{index}" for index in range(2)]
    launcher = f"{name}-launcher"
    keys = tmp_path_factory.mktemp("ssh")
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-f", keys / "id_rsa"], check=True
    )
    (keys / "authorized_keys").write_bytes((keys / "id_rsa.pub").read_bytes())
    keys.chmod(0o755)
    for key in keys.iterdir():
        key.chmod(0o644)  # the operator's mode when sshAuthMountPath is not /root/.ssh
    hostfile = keys.parent / "hostfile"
    hostfile.write_text("".join(f"{worker} slots=1\n" for worker in workers))
    hostfile.chmod(0o444)
    mount = ["--volume", f"{keys}:/home/mpiuser/.ssh:ro"]
    podman("network", "create", "--internal", name)
    try:
        for worker in workers:
            podman("run", "--detach", f"--name={worker}", f"--hostname={worker}", f"--network={name}", *HARDENED,
                   *mount, image, "/usr/sbin/sshd", "-De", "-f", "/etc/ssh/mpi/sshd_config")  # fmt: skip
        env = [f"--env={key}={value}" for key, value in OPERATOR_ENV.items()]
        podman("run", "--detach", f"--name={launcher}", f"--hostname={launcher}", f"--network={name}", *HARDENED,
               *mount, "--volume", f"{hostfile}:/etc/mpi/hostfile:ro", *env, image, "sleep", "infinity")  # fmt: skip

        def run(*command: str) -> subprocess.CompletedProcess:
            return podman("exec", launcher, *command, check=False)

        yield workers, run
    finally:
        for container in [*workers, launcher]:
            podman("rm", "--force", "--time=0", container, check=False)
        podman("network", "rm", "--force", name, check=False)


def test_the_image_has_the_mpi_runtime_and_no_compiler(image):
    tools = "mpirun orted sshd ssh allreduce gcc cc"  # openmpi-bin's mpicc is there, with no compiler behind it
    found = podman("run", "--rm", image, "sh", "-c", f"for tool in {tools}; do command -v $tool; done; :")
    assert [Path(path).name for path in found.stdout.split()] == ["mpirun", "orted", "sshd", "ssh", "allreduce"]


def test_workers_run_sshd_as_uid_1000(job):
    workers, _ = job
    for worker in workers:
        state = podman("inspect", "--format={{.State.Status}}", worker).stdout.strip()
        assert state == "running", podman("logs", worker).stderr
        status = podman("exec", worker, "cat", "/proc/1/status").stdout
        assert re.search(r"^Uid:\s+1000\s+1000\s+1000\s+1000$", status, re.M), status
        assert podman("exec", worker, "cat", "/proc/1/comm").stdout.strip() == "sshd"


def test_mpirun_over_ssh_allreduces_across_both_workers(job):
    workers, run = job
    result = run("wait-for-workers", "mpirun", "-np", "2", "--bind-to", "none", "allreduce", f"--elements={ELEMENTS}")
    assert result.returncode == 0, result.stdout + result.stderr
    print(result.stdout + result.stderr)
    ranks = RANK_LINE.findall(result.stdout)
    assert [int(rank) for rank, *_ in ranks] == [0, 1]
    assert sorted(host for _, host, *_ in ranks) == workers  # one rank on each worker: the sum crossed the network
    assert {(int(size), verdict) for _, _, size, verdict, _ in ranks} == {(ELEMENTS * 8, "ok")}
    assert all(float(seconds) > 0 for *_, seconds in ranks)
    (summary,) = SUMMARY_LINE.findall(result.stdout)
    ranks_count, size, iterations, seconds, algbw, busbw, verdict = summary
    assert (int(ranks_count), int(size), int(iterations), verdict) == (2, ELEMENTS * 8, 20, "ok")
    assert float(seconds) == max(float(rank_seconds) for *_, rank_seconds in ranks)
    assert float(algbw) == pytest.approx(ELEMENTS * 8 / float(seconds) / 1e9, rel=0.01, abs=0.001)
    assert float(busbw) == pytest.approx(float(algbw), abs=0.001)  # 2 (P - 1) / P = 1 for two ranks


def test_a_wrong_result_fails_the_job(job):
    _, run = job
    result = run("mpirun", "-np", "2", "allreduce", "--elements=1024", "--iterations=1", "--expected-offset=1")
    assert result.returncode != 0
    assert [verdict for *_, verdict, _ in RANK_LINE.findall(result.stdout)] == ["FAIL", "FAIL"]
    assert SUMMARY_LINE.search(result.stdout).group(7) == "FAIL"


def test_bad_arguments_are_named_before_any_allreduce(job):
    _, run = job
    result = run("mpirun", "-np", "2", "allreduce", "--elements=0")
    assert result.returncode != 0
    assert "allreduce: --elements must be a whole number >= 1, got '0'" in result.stderr
    assert result.stderr.count("allreduce: --elements") == 1  # rank 0 alone says it
    assert not RANK_LINE.search(result.stdout)


def test_the_launcher_gives_up_on_a_worker_that_never_answers(job):
    workers, run = job
    result = run("env", "MPI_SSH_PORT=2223", "MPI_WAIT_SECONDS=2", "wait-for-workers", "true")  # nothing listens there
    assert (result.returncode, result.stderr.strip()) == (
        1,
        f"wait-for-workers: {workers[0]} port 2223 not reachable after 2 s",
    )
    result = run("env", "MPI_WAIT_SECONDS=soon", "wait-for-workers", "true")
    assert (result.returncode, result.stderr.strip()) == (
        2,
        "wait-for-workers: MPI_WAIT_SECONDS must be a whole number of seconds, got 'soon'",
    )
