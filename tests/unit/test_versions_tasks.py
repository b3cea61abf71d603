"""The versions role's shared tasks, run as a node role runs them, in check mode against localhost.

apt_source.yml: a signing key is trusted only when one of its primary keys has the pinned fingerprint (or, with no
fingerprint pinned, the pinned long key id, which leaves a note for the run's summary), and a mismatch stops the run
naming the variable; a login in the repository URL never reaches the list, the output or a diff; nothing is written
in check mode. os_vars.yml: the first per-OS vars file is loaded, and an unsupported OS stops the run naming it and
the supported ones. The OS is presented to Ansible by a stand-in facts module, so every distribution runs here.
"""

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ansible_probe import ROOT, run

# --- apt_source.yml -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def signing_key(tmp_path_factory) -> Iterator[tuple[Path, str]]:
    """An ASCII-armoured test signing key and its primary key's fingerprint (the gpg-agent that made it is stopped
    after the module)."""
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    subprocess.run(
        ["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "Railforge test <t@example.invalid>", "ed25519"],
        env=env,
        check=True,
        capture_output=True,
    )
    key = home / "key.asc"
    key.write_bytes(subprocess.run(["gpg", "--armor", "--export"], env=env, check=True, capture_output=True).stdout)
    colons = subprocess.run(["gpg", "--with-colons", "--fingerprint"], env=env, check=True, capture_output=True)
    fingerprint = next(line.split(":")[9] for line in colons.stdout.decode().splitlines() if line.startswith("fpr:"))
    yield key, fingerprint
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False, capture_output=True)


def apt_source(
    key_url: str,
    fingerprint: str,
    trusted: bool = False,
    long_id: str | None = None,
    url: str = "file:///nonexistent/repo/",
) -> list:
    """The probe's tasks: the shared apt_source.yml with these pins (a long id as DOCA passes one), then the notes it
    left for the run's summary."""
    pins = {"versions_apt_source_key_fingerprint": fingerprint}
    if long_id is not None:
        pins |= {"versions_apt_source_key_long_id": long_id, "versions_apt_source_long_id_variable": "site_key_long_id"}
    return [
        {
            "name": "Add the site source",
            "ansible.builtin.include_role": {"name": "versions", "tasks_from": "apt_source.yml"},
            "vars": {
                "versions_apt_source_name": "railforge-unit-test",
                "versions_apt_source_url": url,
                "versions_apt_source_suite": "./",
                "versions_apt_source_trusted": trusted,
                "versions_apt_source_key_url": key_url,
                "versions_apt_source_fingerprint_variable": "site_repo_key_fingerprint",
                **pins,
            },
        },
        {
            "name": "Show the run notes",
            "ansible.builtin.debug": {"msg": "notes: {{ versions_run_notes | default([]) | join(' | ') }}."},
        },
    ]


def test_a_key_with_the_pinned_fingerprint_is_accepted_and_nothing_written(tmp_path, signing_key):
    key, fingerprint = signing_key
    spaced = " ".join(fingerprint[i : i + 4] for i in range(0, 40, 4)).lower()  # as gpg --fingerprint shows it
    rc, out = run(tmp_path, apt_source(f"file://{key}", spaced))
    assert rc == 0, out
    assert "TASK [versions : Install the checked key where apt reads it" in out
    assert not Path("/etc/apt/sources.list.d/railforge-unit-test.list").exists()
    assert not Path("/etc/apt/keyrings/railforge-unit-test.asc").exists()


def test_a_key_with_another_fingerprint_stops_the_run_naming_the_variable(tmp_path, signing_key):
    key, fingerprint = signing_key
    other = "EB693B3035CD5710E231E123A4B469963BF863CC"
    rc, out = run(tmp_path, apt_source(f"file://{key}", other))
    assert rc == 2, out
    assert f"site_repo_key_fingerprint: the key at file://{key} is {fingerprint}, not the pinned {other}" in out
    assert "apt was not told to trust it" in out
    assert "Install the checked key" not in out


def test_a_missing_fingerprint_stops_the_run_before_any_download(tmp_path, signing_key):
    key, _ = signing_key
    rc, out = run(tmp_path, apt_source(f"file://{key}", ""))
    assert rc == 2, out
    assert "site_repo_key_fingerprint must be the 40-hex-digit fingerprint of the key at" in out
    assert "Download the signing key" not in out


def test_a_file_that_is_no_key_is_refused(tmp_path):
    junk = tmp_path / "gpgkey"
    junk.write_text("<html>not found</html>\n")
    rc, out = run(tmp_path, apt_source(f"file://{junk}", "EB693B3035CD5710E231E123A4B469963BF863CC"))
    assert rc == 2, out
    assert "is no OpenPGP key gpg can read" in out


def test_a_trusted_source_downloads_no_key(tmp_path):
    rc, out = run(tmp_path, apt_source("", "", trusted=True))
    assert rc == 0, out
    assert re.search(r"Download the signing key\] \**\nskipping", out), out
    assert re.search(r"Write the apt source \(a list replaced is backed up\)\] \**\nchanged", out), out


def noted(out: str, key_url: str, long_id: str, variable: str) -> bool:
    """Whether the run's notes are the one a key checked by its long id only leaves."""
    note = f"{key_url} was checked by its long key id {long_id} only; pin its full fingerprint in {variable}"
    return f"notes: {note} to check all 40 hex digits." in " ".join(out.split())


def test_with_no_fingerprint_a_key_with_the_pinned_long_id_is_accepted_and_noted_once(tmp_path, signing_key):
    key, fingerprint = signing_key
    rc, out = run(tmp_path, apt_source(f"file://{key}", "", long_id=fingerprint[-16:].lower()))
    assert rc == 0, out
    assert "TASK [versions : Install the checked key where apt reads it" in out
    assert noted(out, f"file://{key}", fingerprint[-16:], "site_repo_key_fingerprint"), out


def test_with_no_fingerprint_a_key_with_another_long_id_stops_the_run_naming_the_variable(tmp_path, signing_key):
    key, fingerprint = signing_key
    rc, out = run(tmp_path, apt_source(f"file://{key}", "", long_id="A024F6F0E6D6A281"))
    assert rc == 2, out
    assert f"site_key_long_id: the key at file://{key} is {fingerprint}, not the pinned A024F6F0E6D6A281" in out
    assert "apt was not told to trust it" in out
    assert "Install the checked key" not in out


def test_a_pinned_fingerprint_wins_over_the_long_id(tmp_path, signing_key):
    key, fingerprint = signing_key
    rc, out = run(tmp_path, apt_source(f"file://{key}", fingerprint, long_id="A024F6F0E6D6A281"))
    assert rc == 0, out
    assert "notes: ." in out, out
    other = "EB693B3035CD5710E231E123A4B469963BF863CC"
    rc, out = run(tmp_path, apt_source(f"file://{key}", other, long_id=fingerprint[-16:]))
    assert rc == 2, out
    assert f"site_repo_key_fingerprint: the key at file://{key} is {fingerprint}, not the pinned {other}" in out


def test_neither_fingerprint_nor_long_id_stops_the_run_naming_both(tmp_path, signing_key):
    key, _ = signing_key
    rc, out = run(tmp_path, apt_source(f"file://{key}", "", long_id=""))
    assert rc == 2, out
    assert "site_repo_key_fingerprint must be the 40-hex-digit fingerprint of the key at" in out
    assert "or empty with site_key_long_id the key's 16-hex-digit long id, got ''; nothing was changed" in out
    assert "Download the signing key" not in out


def test_a_login_in_the_repository_url_is_never_printed_nor_in_the_list(tmp_path):
    password = "Tr0ub4dor-unit"
    url = f"https://ops:{password}@mirror.example.invalid/doca/3.2.1/debian12/x86_64/"
    rc, out = run(tmp_path, apt_source("", "", trusted=True, url=url), options=("--diff", "-vvv"))
    assert rc == 0, out
    assert password not in out
    assert "deb [trusted=yes] https://mirror.example.invalid/doca/3.2.1/debian12/x86_64/ ./" in out
    login_task = out.split("TASK [versions : Give apt the repository's login in a root-only file")[1].split("TASK [")[0]
    assert "changed: [localhost]" in login_task and "output has been hidden" in login_task, out


@pytest.fixture(scope="module")
def standin_doca_repo(tmp_path_factory) -> Iterator[tuple[Path, str]]:
    """The stand-in DOCA repository the rdma scenario serves, signed as it signs it (a throw-away key made by
    build_repo.py), and that key's fingerprint."""
    out = tmp_path_factory.mktemp("standin")
    home = out / "signing-key"
    builder = [sys.executable, ROOT / "tests/standins/build_repo.py", "--sign-with", home, out / "doca"]
    subprocess.run([*builder, ROOT / "tests/standins/doca.yml"], check=True, capture_output=True)
    yield out / "doca", (home / "fingerprint.txt").read_text().strip()
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False, capture_output=True)


def doca_install(repo: Path) -> tuple[list, dict]:
    """doca_ofed's install tasks with its own defaults (the key pins from roles/versions), against the stand-in."""
    tasks = [
        {"name": "Install DOCA", "ansible.builtin.include_role": {"name": "doca_ofed", "tasks_from": "install.yml"}},
        apt_source("", "")[1],  # the run notes
    ]
    return tasks, {"doca_ofed_base_url": f"file://{repo}", "doca_ofed_repo_key_url": f"file://{repo}/key.asc"}


def test_doca_by_default_refuses_a_key_whose_long_id_is_not_nvidias(tmp_path, standin_doca_repo):
    repo, fingerprint = standin_doca_repo
    tasks, pins = doca_install(repo)
    rc, out = run(tmp_path, tasks, pins)
    assert rc == 2, out
    assert f"doca_ofed_repo_key_long_id: the key at file://{repo}/key.asc is {fingerprint}, not the pinned" in out
    assert "A024F6F0E6D6A281; apt was not told to trust it" in " ".join(out.split()), out
    assert "Install the checked key" not in out


def test_doca_takes_the_standin_key_by_its_long_id_pinned_in_the_inventory(tmp_path, standin_doca_repo):
    repo, fingerprint = standin_doca_repo
    tasks, pins = doca_install(repo)
    rc, out = run(tmp_path, tasks, pins | {"doca_ofed_repo_key_long_id": fingerprint[-16:]})
    assert rc == 0, out
    assert "TASK [versions : Install the checked key where apt reads it" in out
    assert noted(out, f"file://{repo}/key.asc", fingerprint[-16:], "doca_ofed_repo_key_fingerprint"), out


def test_doca_with_a_pinned_fingerprint_ignores_the_default_long_id(tmp_path, standin_doca_repo):
    repo, fingerprint = standin_doca_repo
    tasks, pins = doca_install(repo)
    rc, out = run(tmp_path, tasks, pins | {"doca_ofed_repo_key_fingerprint": fingerprint})
    assert rc == 0, out
    assert "TASK [versions : Install the checked key where apt reads it" in out
    assert "notes: ." in out, out


# --- os_vars.yml ----------------------------------------------------------------------------------------------


def os_probe(distribution: str, version: str) -> list:
    facts = {
        "distribution": distribution,
        "distribution_version": version,
        "distribution_major_version": version.split(".")[0],
        "os_family": "Debian",
    }
    return [
        {"name": "Present the node as another OS", "fake_os": {"facts": facts}},
        {
            "name": "Load the OS constants",
            "ansible.builtin.include_role": {"name": "versions", "tasks_from": "os_vars.yml"},
        },
        {"name": "Show which file was loaded", "ansible.builtin.debug": {"msg": "loaded {{ probe_os_file }}"}},
    ]


@pytest.mark.parametrize(
    ("distribution", "version", "loaded"),
    [("Debian", "12.11", "Debian"), ("Ubuntu", "22.04", "Ubuntu"), ("Ubuntu", "24.04", "Ubuntu-24")],
)
def test_the_most_specific_vars_file_is_loaded(tmp_path, distribution, version, loaded):
    rc, out = run(tmp_path, os_probe(distribution, version))
    assert rc == 0, out
    assert f"msg: loaded {loaded}\n" in out, out


@pytest.mark.parametrize(("distribution", "version"), [("Debian", "13.1"), ("Ubuntu", "24.10"), ("Rocky", "9.4")])
def test_an_unsupported_os_stops_the_run_naming_it(tmp_path, distribution, version):
    rc, out = run(tmp_path, os_probe(distribution, version))
    assert rc == 2, out
    assert f"probe: localhost runs {distribution} {version}, which is not supported" in out, out
    assert "supported: Debian 12, Ubuntu 22.04, Ubuntu 24.04; nothing was changed" in out, out
