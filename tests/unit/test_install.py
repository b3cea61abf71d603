"""scripts/install.sh as an operator runs it on the machine running Ansible: a copy of the checkout owned by an
unprivileged user (nobody, when the tests run as root), Debian's own Python, no network (pip reads the wheels
`make setup` fetched with `scripts/install.sh --download`), and podman, go, sudo and apt-get on the PATH replaced by
commands that record being called. Then the installed toolchain runs the pre-flight on the example inventory (it
contacts no host), and a second run changes nothing."""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEELS = Path("/var/cache/railforge/wheels")  # scripts/setup.sh fills it
NOBODY = 65534
FORBIDDEN = ("podman", "go", "sudo", "apt-get")


@pytest.fixture
def workdir():
    """A directory the unprivileged user can reach (pytest's tmp_path lies under a root-only one)."""
    path = Path(tempfile.mkdtemp(prefix="railforge-install-"))
    yield path
    shutil.rmtree(path)


def test_install_needs_no_root_podman_go_or_network_and_its_toolchain_runs_the_preflight(workdir):
    assert (WHEELS / ".sha256").is_file(), f"no wheels in {WHEELS}: run make setup"
    tmp_path = workdir
    checkout, home, shadow, called = (tmp_path / name for name in ("checkout", "home", "bin", "called"))
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (file.decode() for file in files)):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not part of the copy
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, checkout / name)
    for directory in (home, shadow, called):
        directory.mkdir()
    for command in FORBIDDEN:
        (shadow / command).write_text(f"#!/bin/sh\ntouch {called}/{command}\nexit 1\n")
        (shadow / command).chmod(0o755)
    as_user: list[str] = []
    if os.geteuid() == 0:
        for path in (tmp_path, *tmp_path.rglob("*")):
            os.lchown(path, NOBODY, NOBODY)
        as_user = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    env = {
        "HOME": str(home),
        "PATH": f"{shadow}:/usr/local/bin:/usr/bin:/bin",
        "RAILFORGE_PYTHON": "/usr/bin/python3",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(WHEELS),
        "ANSIBLE_CONFIG": str(checkout / "ansible.cfg"),
        "ANSIBLE_SSH_ARGS": "-o ProxyCommand=false",  # should a play reach for a host: fail here, send nothing
        "ANSIBLE_NOCOLOR": "1",
    }

    def run(*argv: str) -> tuple[subprocess.CompletedProcess, float]:
        started = time.monotonic()
        result = subprocess.run([*as_user, *argv], cwd=checkout, env=env, capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"{argv}:\n{result.stdout[-4000:]}{result.stderr[-4000:]}"
        return result, time.monotonic() - started

    first, seconds = run("scripts/install.sh")
    print(f"scripts/install.sh from a fresh copy: {seconds:.0f} s")
    assert "python: installing requirements.txt and this package into .venv" in first.stdout
    assert "collections: installed kubernetes.core 6.2.0" in first.stdout
    assert "source .venv/bin/activate" in first.stdout
    assert sorted(path.name for path in called.iterdir()) == []
    version = run(".venv/bin/ansible", "--version")[0].stdout
    assert version.startswith("ansible [core 2.19.14]") and "/usr/bin/python3" not in version.split("\n")[0]
    preflight = run(".venv/bin/ansible-playbook", "-i", "inventories/example/hosts.yml", "playbooks/preflight.yml")[0]
    assert "failed=0" in preflight.stdout and "unreachable=0" in preflight.stdout, preflight.stdout[-3000:]
    # what validate.yml and benchmark.yml run on this machine
    assert "render" in run(".venv/bin/railforge", "bench", "--help")[0].stdout
    run(".venv/bin/python", "-m", "railforge.validate", "--help")

    second, seconds = run("scripts/install.sh")
    print(f"scripts/install.sh again: {seconds:.0f} s")
    assert "python: .venv up to date (requirements.txt)" in second.stdout
    assert "collections: all pinned versions present" in second.stdout


def test_install_refuses_a_python_it_cannot_use_in_one_line(tmp_path):
    python310 = tmp_path / "python3.10"  # stands in for a Python 3.10: answers only the version question
    python310.write_text("#!/bin/sh\necho 3.10\n")
    python310.chmod(0o755)
    for python, expected in (
        (python310, f"install: {python310} is Python 3.10; the machine running Ansible needs 3.11 to 3.13"),
        (tmp_path / "missing", f"install: {tmp_path}/missing does not run; set RAILFORGE_PYTHON"),
    ):
        result = subprocess.run(
            ["scripts/install.sh"],
            cwd=ROOT,
            env={**os.environ, "RAILFORGE_PYTHON": str(python)},
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 2 and result.stdout == "", result
        assert result.stderr.startswith(expected) and result.stderr.count("\n") == 1, result.stderr
