"""Vendor facts the node roles encode: package names, version patterns and repository directories.

Each rule is rendered by Ansible itself from the role's vars/ and defaults/ files (one ansible-playbook run per
role, nothing touched), for the node shapes and versions NVIDIA's repositories and scripts show. The version
patterns are then matched the way the apt module matches them (fnmatch against the Debian version).
"""

import json
import os
import subprocess
from fnmatch import fnmatch
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]


def os_vars(role: str, facts: dict) -> dict:
    """The role's vars/<distribution>.yml for these facts (Debian when they name none), as os_vars.yml loads it."""
    path = ROOT / f"roles/{role}/vars/{facts.get('distribution', 'Debian')}.yml"
    return yaml.safe_load(path.read_text()) if path.exists() else {}


def render(tmp_path: Path, role: str, expression: str, cases: list[dict]) -> list:
    """The value of `expression` for every case (task vars, ansible_facts included), via the role's variables, its
    OS vars and the versions pins its defaults name."""
    tasks = [
        {
            "name": f"case {n}",
            "ansible.builtin.debug": {"msg": "{{ " + expression + " }}"},
            "vars": {**os_vars(role, case.get("ansible_facts", {})), **case},
        }
        for n, case in enumerate(cases)
    ]
    files = [
        ROOT / "roles/versions/defaults/main.yml",
        *(ROOT / f"roles/{role}/{p}/main.yml" for p in ("defaults", "vars")),
    ]
    play = [
        {
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars_files": [str(path) for path in files],
            "tasks": tasks,
        }
    ]
    playbook = tmp_path / f"{role}.yml"
    playbook.write_text(yaml.safe_dump(play))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "json"}
    result = subprocess.run(
        ["ansible-playbook", "-i", "localhost,", str(playbook)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    tasks_run = json.loads(result.stdout)["plays"][0]["tasks"]
    return [task["hosts"]["localhost"]["msg"] for task in tasks_run]


X86, ARM = {"architecture": "x86_64"}, {"architecture": "aarch64"}
DEBIAN_12 = {"distribution": "Debian", "distribution_version": "12.12", "distribution_major_version": "12"}
UBUNTU_2404 = {"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24"}

FABRIC_MANAGER = [
    # (driver version, GPU architectures, node facts) -> packages, as NVIDIA's listings and scripts name them
    ("535.216.03", ["Ampere"], X86, ["nvidia-fabricmanager-535=535.216.03-*"]),
    ("570.195.03", ["Hopper"], X86, ["nvidia-fabricmanager-570=570.195.03-*", "libnvidia-nscq-570=570.195.03-*"]),
    ("580.95.05", ["Hopper"], X86, ["nvidia-fabricmanager=580.95.05-*", "libnvidia-nscq=580.95.05-*"]),
    (
        "570.195.03",
        ["Blackwell"],
        X86,
        [
            "nvidia-fabricmanager-570=570.195.03-*",
            "libnvidia-nscq-570=570.195.03-*",
            "libnvsdm-570=570.195.03-*",
            "nvlsm",
        ],
    ),
    (
        "580.105.08",
        ["Blackwell"],
        X86,
        ["nvidia-fabricmanager=580.105.08-*", "libnvidia-nscq=580.105.08-*", "libnvsdm=580.105.08-*", "nvlsm"],
    ),
    # NVIDIA ships no libnvsdm for arm64 (Grace): the rest is the same.
    (
        "580.105.08",
        ["Blackwell"],
        ARM,
        ["nvidia-fabricmanager=580.105.08-*", "libnvidia-nscq=580.105.08-*", "nvlsm"],
    ),
]


def test_fabric_manager_packages_carry_the_branch_below_580_only(tmp_path):
    cases = [
        {
            "nvidia_fabricmanager_driver_version": version,
            "nvidia_fabricmanager_architectures": architectures,
            "ansible_facts": facts,
        }
        for version, architectures, facts, _ in FABRIC_MANAGER
    ]
    rendered = render(tmp_path, "nvidia_fabricmanager", "nvidia_fabricmanager_packages", cases)
    assert rendered == [packages for *_, packages in FABRIC_MANAGER]


@pytest.mark.parametrize(
    ("revision", "matches"),
    [
        ("580.95.05-1", True),  # NVIDIA's Debian and Ubuntu CUDA repositories
        ("580.95.05-0ubuntu1", True),  # Ubuntu's own archive
        ("580.95.05-1ubuntu1", True),  # a local repository's repack
        ("580.95.05-1.ubuntu2204", True),
        ("580.95.051-1", False),  # another version, not a revision
        ("580.95.0-1", False),
    ],
)
def test_version_pattern_takes_any_revision_of_the_version(revision, matches):
    """The apt module matches `name=<pattern>` with fnmatch against the version, as NVIDIA's `=<version>*` pins."""
    assert fnmatch(revision, "580.95.05-*") is matches


def test_fabric_manager_reads_one_version_from_driver_and_fm_revisions_that_differ(tmp_path):
    installed = {
        "nvidia-open-580": "580.95.05-0ubuntu1",
        "nvidia-fabricmanager": "580.95.05-1",
        "libnvidia-nscq": "580.95.05-1",
        "nvidia-container-toolkit": "1.17.8-1",
    }
    upgraded_halfway = {"nvidia-open": "580.105.08-1", "nvidia-fabricmanager": "580.95.05-1"}
    rendered = render(
        tmp_path,
        "nvidia_fabricmanager",
        "nvidia_fabricmanager_driver_versions",
        [{"nvidia_driver_installed": installed}, {"nvidia_driver_installed": upgraded_halfway}],
    )
    assert rendered[0] == ["580.95.05"]
    assert sorted(rendered[1]) == ["580.105.08", "580.95.05"], "a half-done upgrade is two versions, refused"


def test_driver_is_pinned_to_the_version_or_the_installed_one_or_the_branch(tmp_path):
    node = {"nvidia_driver_branch": "580", "nvidia_driver_flavour_effective": "open"}
    debian = {**node, "ansible_facts": DEBIAN_12}
    ubuntu = {**node, "ansible_facts": UBUNTU_2404}
    cases = [
        {**debian, "nvidia_driver_version": "580.105.08", "nvidia_driver_installed": {"nvidia-open": "580.95.05-1"}},
        {**debian, "nvidia_driver_version": "", "nvidia_driver_installed": {}},  # first install: the branch
        # installed before: kept, so a fabric manager can follow it while the repository has a newer one
        {**ubuntu, "nvidia_driver_version": "", "nvidia_driver_installed": {"nvidia-open-580": "580.95.05-0ubuntu1"}},
        # another branch installed: the wanted branch
        {**debian, "nvidia_driver_version": "", "nvidia_driver_installed": {"nvidia-open": "570.195.03-1"}},
    ]
    assert render(tmp_path, "nvidia_driver", "nvidia_driver_version_pattern", cases) == [
        "580.105.08-*",
        "580.*",
        "580.95.05-*",
        "580.*",
    ]


DOCA_REPOSITORY = [
    # DOCA builds per major OS release from 3.2 (DKMS); earlier releases per point release NVIDIA built.
    ({**DEBIAN_12, **X86}, "doca", "3.2.1", "https://linux.mellanox.com/public/repo/doca/3.2.1/debian12/x86_64/"),
    ({**DEBIAN_12, **ARM}, "doca", "3.2.1", "https://linux.mellanox.com/public/repo/doca/3.2.1/debian12/arm64-sbsa/"),
    ({**DEBIAN_12, **X86}, "doca", "2.9.1", "https://linux.mellanox.com/public/repo/doca/2.9.1/debian12.12/x86_64/"),
    (
        {**UBUNTU_2404, **ARM},
        "doca",
        "3.2.1",
        "https://linux.mellanox.com/public/repo/doca/3.2.1/ubuntu24.04/arm64-sbsa/",
    ),
    # Legacy MLNX_OFED: Debian architecture names, as its mellanox_mlnx_ofed.list's $(ARCH).
    (
        {**UBUNTU_2404, **ARM},
        "mlnx_ofed",
        "3.2.1",
        "https://linux.mellanox.com/public/repo/mlnx_ofed/24.10-1.1.4.0/ubuntu24.04/arm64/",
    ),
    (
        {**UBUNTU_2404, **X86},
        "mlnx_ofed",
        "3.2.1",
        "https://linux.mellanox.com/public/repo/mlnx_ofed/24.10-1.1.4.0/ubuntu24.04/amd64/",
    ),
]


def test_doca_repository_directory_per_release_flavour_and_architecture(tmp_path):
    cases = [
        {"ansible_facts": facts, "doca_ofed_flavour": flavour, "doca_ofed_version": version}
        for facts, flavour, version, _ in DOCA_REPOSITORY
    ]
    rendered = render(tmp_path, "doca_ofed", "doca_ofed_repo_url | trim", cases)
    assert rendered == [url for *_, url in DOCA_REPOSITORY]


def test_doca_meta_package_pattern_selects_the_release_only(tmp_path):
    (pattern,) = render(tmp_path, "doca_ofed", "doca_ofed_version_pattern", [{"doca_ofed_version": "3.1.0"}])
    assert fnmatch("3.1.0-0.0.1", pattern)
    assert fnmatch("3.1.0-091000-25.07-ubuntu2404", pattern)
    assert not fnmatch("3.1.10-1", pattern)
    assert not fnmatch("2.9.1-0.0.1", pattern)


def test_doca_default_release_drives_connectx8(tmp_path):
    (supported,) = render(tmp_path, "doca_ofed", "doca_ofed_version is version(doca_ofed_connectx8_from, '>=')", [{}])
    assert supported is True


def test_gdrcopy_downloads_are_nvidia_published_file_names(tmp_path):
    cases = [{"ansible_facts": {**UBUNTU_2404, **X86}}, {"ansible_facts": {**UBUNTU_2404, **ARM}}]
    base = "https://developer.download.nvidia.com/compute/redist/gdrcopy/CUDA%2012.8/ubuntu24_04"
    assert render(tmp_path, "gpudirect", "gpudirect_gdrcopy_urls", cases) == [
        [
            f"{base}/x64/gdrdrv-dkms_2.5.1-1_amd64.Ubuntu24_04.deb",
            f"{base}/x64/libgdrapi_2.5.1-1_amd64.Ubuntu24_04.deb",
        ],
        [
            f"{base}/aarch64/gdrdrv-dkms_2.5.1-1_arm64.Ubuntu24_04.deb",
            f"{base}/aarch64/libgdrapi_2.5.1-1_arm64.Ubuntu24_04.deb",
        ],
    ]


def test_gdrcopy_default_is_a_published_version(tmp_path):
    (version,) = render(tmp_path, "gpudirect", "gpudirect_gdrcopy_version", [{}])
    assert version in {"2.4-1", "2.5-1", "2.5.1-1", "2.6-1"}
