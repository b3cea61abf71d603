"""playbooks/preflight.yml against malformed inventories: every problem named, all at once, nothing run.

Each file in tests/fixtures/inventories is a broken inventory; its `# expect:` lines are problems the check
must report, word for word (a line may leave out the start of the host list). Below them, unit tests of the
rules themselves (plugins/module_utils/railforge_inventory.py); test_inventory_malformed.py runs site.yml.
"""

import importlib.util
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MALFORMED = sorted((ROOT / "tests/fixtures/inventories").glob("*.yml"))
PURE_MODULE = "plugins/module_utils/railforge_inventory.py"


def run_check(inventory: Path) -> subprocess.CompletedProcess:
    # The play targets the fixtures' hosts (never contacted): any SSH attempt would fail on this machine.
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_SSH_ARGS": "-o ProxyCommand=false",
    }
    return subprocess.run(
        ["ansible-playbook", "-i", str(inventory), str(ROOT / "playbooks/preflight.yml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )


def expected_problems(inventory: Path) -> list[str]:
    return [
        line.removeprefix("# expect: ") for line in inventory.read_text().splitlines() if line.startswith("# expect: ")
    ]


def test_there_are_at_least_ten_malformed_inventories():
    assert len(MALFORMED) >= 10


@pytest.mark.parametrize("inventory", MALFORMED, ids=[path.stem for path in MALFORMED])
def test_malformed_inventory_fails_with_every_expected_problem(inventory):
    result = run_check(inventory)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "problem(s); nothing was changed" in output
    for problem in expected_problems(inventory):
        assert problem in output, f"missing: {problem}\n{output}"


def test_the_example_inventory_passes():  # the lab's, generated from it: test_lab_inventory.py
    result = run_check(ROOT / "inventories/example/hosts.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def load_inventory_checks():
    spec = importlib.util.spec_from_file_location("railforge_inventory", ROOT / PURE_MODULE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def role_specs() -> dict:
    specs = {}
    for path in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        specs.update(yaml.safe_load(path.read_text())["argument_specs"]["main"]["options"])
    return specs


# What every inventory below names: the cluster, the node's address and the registry the scheduler's image is pushed
# to (its default is the local build, localhost/..., which no node can pull).
CLUSTER = {
    "railforge_cluster_name": "forge",
    "railforge_node_ip": "10.0.0.1",
    "versions_railforge_scheduler_registry": "registry.test.internal/railforge",
}


def test_every_role_default_set_explicitly_passes_every_rule():
    """The rules are no stricter than the roles' own defaults (templates left to the roles aside)."""
    checks = load_inventory_checks()
    specs = role_specs()
    defaults = {name: spec["default"] for name, spec in specs.items() if "{{" not in str(spec.get("default"))}
    host = {**defaults, **CLUSTER, "railforge_gpu_count": 8}  # the registry of CLUSTER: the one default to replace
    groups = {"all": ["gpu-01"], "kube_control_plane": ["gpu-01"], "kube_node": ["gpu-01"], "gpu_nodes": ["gpu-01"]}
    groups["nvswitch_nodes"] = groups["rdma_nodes"] = []  # the groups the roles name, set explicitly, must exist
    assert checks.validate(groups, {"gpu-01": host}, specs) == []


def test_every_rule_names_a_declared_variable_or_option():
    checks = load_inventory_checks()
    declared = {**role_specs(), **checks.INVENTORY_VARIABLES, "ansible_host": {}}
    for key, rule in checks.RULES.items():
        name, _, option = key.partition("[].")
        assert name in declared, key
        assert not option or option in declared[name]["options"], key
        assert rule.get("format") is None or rule["format"] in checks.FORMATS, key


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("10.10.1.4", None),
        ("dgx-01.example.internal", None),
        ("10.10.1.400", "an IPv4 address (four numbers 0-255)"),
        ("10.10.400", "an IP address or a host name"),
        ("fe80::1", None),
        ("host name", "an IP address or a host name"),
    ],
)
def test_dotted_numbers_are_addresses_never_host_names(value, problem):
    assert load_inventory_checks().host_problem(value) == problem


def test_url_passwords_are_masked_and_nothing_else():
    mask = load_inventory_checks().mask
    assert mask("got 'http://ops:pa:ss@proxy:3128/'") == "got 'http://ops:********@proxy:3128/'"
    assert mask("http://proxy.example.internal:3128") == "http://proxy.example.internal:3128"
    assert mask("http://user@proxy:3128") == "http://user@proxy:3128"


def test_a_pin_changed_in_versions_is_checked_against_the_role_variables_that_default_to_it():
    """Role defaults name their roles/versions pin; the rules between variables read the pin's value."""
    checks = load_inventory_checks()
    specs = role_specs()
    groups = {"all": ["gpu-01"], "kube_control_plane": ["gpu-01"], "kube_node": ["gpu-01"]}
    base = dict(CLUSTER)
    older_branch = {**base, "versions_nvidia_driver_branch": "570", "nvidia_dcgm_cuda_major": 13}
    assert any(
        "nvidia_dcgm_cuda_major 13 needs nvidia_driver_branch 580 or newer, got branch 570" in problem
        for problem in checks.validate(groups, {"gpu-01": older_branch}, specs)
    )
    other_toolkit = {**base, "versions_cuda_toolkit": "12.9", "cuda_toolkit_default_version": "12.8"}
    assert any(
        "cuda_toolkit_default_version must be one of cuda_toolkit_versions (12.9), got '12.8'" in problem
        for problem in checks.validate(groups, {"gpu-01": other_toolkit}, specs)
    )
    assert checks.validate(groups, {"gpu-01": {**base, "versions_cuda_toolkit": "12.9"}}, specs) == []


def test_key_fingerprints_are_forty_hex_digits():
    checks = load_inventory_checks()
    specs = role_specs()
    groups = {"all": ["n-01"], "kube_control_plane": ["n-01"], "kube_node": ["n-01"]}
    base = dict(CLUSTER)
    spaced = "EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC".replace("  ", " ")
    for good in ("C95B321B61E88C1809C4F759DDCAE044F796ECB0", spaced.lower()):
        assert checks.validate(groups, {"n-01": {**base, "doca_ofed_repo_key_fingerprint": good}}, specs) == []
    problems = checks.validate(
        groups, {"n-01": {**base, "versions_doca_repo_key_fingerprint": "A024F6F0E6D6A281"}}, specs
    )
    assert problems == [
        "n-01: versions_doca_repo_key_fingerprint must be an OpenPGP key fingerprint of 40 hex digits "
        "(gpg --show-keys prints it), got 'A024F6F0E6D6A281' (str)"
    ]
    # where NVIDIA publishes only the long id, the pin is 16 hex digits (the fingerprint's last 16)
    for variable in ("versions_doca_repo_key_long_id", "doca_ofed_repo_key_long_id"):
        assert checks.validate(groups, {"n-01": {**base, variable: "a024f6f0e6d6a281"}}, specs) == []
        assert checks.validate(groups, {"n-01": {**base, variable: "0xA024F6F0E6D6A281"}}, specs) == [
            f"n-01: {variable} must be an OpenPGP key long id of 16 hex digits like A024F6F0E6D6A281, "
            "got '0xA024F6F0E6D6A281' (str)"
        ]


@pytest.mark.parametrize(
    ("variable", "bad", "good", "expected"),
    [
        ("versions_kubernetes_registry", "https://mirror/k8s", "mirror:5000/k8s", "a registry HOST[:PORT][/PATH]"),
        ("kubernetes_image_repository", "mirror:5000/k8s/", "registry.k8s.io", "a registry HOST[:PORT][/PATH]"),
        ("versions_podgroup_crd_checksum", "md5:0123", "sha256:" + "0" * 64, "sha256: and 64 lowercase hex digits"),
        ("kubernetes_apt_repo_key_fingerprint", "", "DE15B14486CD377B9E876E1A234654DA9A296436", "an OpenPGP key"),
        ("kubernetes_pod_subnet", "10.244.0.1/16", "10.244.0.0/16", "a network"),
        ("versions_openmpi_image", "railforge-openmpi", "localhost/railforge-openmpi:0.1.0", "an image REGISTRY/"),
    ],
)
def test_cluster_pins_and_kubernetes_inputs_are_checked(variable, bad, good, expected):
    checks = load_inventory_checks()
    groups = {"all": ["cp-01"], "kube_control_plane": ["cp-01"], "kube_node": ["cp-01"]}
    host = dict(CLUSTER)
    problems = checks.validate(groups, {"cp-01": {**host, variable: bad}}, role_specs())
    assert len(problems) == 1 and problems[0].startswith(f"cp-01: {variable} must be {expected}"), problems
    assert checks.validate(groups, {"cp-01": {**host, variable: good}}, role_specs()) == []


def test_the_playbooks_switches_carry_the_prefix_and_are_declared():
    """A variable a playbook reads with a default (a switch an importing playbook may set) is a railforge_* variable of
    playbooks/site.meta.yml, so the inventory check knows it and docs/variables.md lists it."""
    declared = yaml.safe_load((ROOT / "playbooks/site.meta.yml").read_text())["argument_specs"]["main"]["options"]
    switches = {
        name
        for playbook in (ROOT / "playbooks").glob("*.yml")
        for name in re.findall(r"(?:\{\{|when: not) *(\w+) *\| *default\(", playbook.read_text())
        if not name.startswith("ansible_")  # Ansible's own (ansible_limit ...)
    }
    assert "railforge_stage_hosts" in switches
    assert sorted(switches - set(declared)) == []


GDRCOPY_FILES = ("gdrdrv-dkms_2.5.1-1_amd64.Ubuntu24_04.deb", "libgdrapi_2.5.1-1_amd64.Ubuntu24_04.deb")


def gdrcopy_problems(host_variables: dict, rdma_group: list[str] | None = None) -> list[str]:
    checks = load_inventory_checks()
    groups = {"all": ["n-01"], "kube_control_plane": ["n-01"], "kube_node": ["n-01"], "rdma_nodes": ["n-01"]}
    if rdma_group is not None:
        groups.update({"rdma_nodes": rdma_group, "site_rdma": ["n-01"]})
    base = {
        **CLUSTER,
        "railforge_rdma_hcas": ["mlx5_0"],
        "railforge_rdma_link_layer": "infiniband",
        "railforge_rdma_rate_gbps": 400,
        "rail_networks_cidrs": ["10.200.0.0/24"],
    }
    return checks.validate(groups, {"n-01": {**base, **host_variables}}, role_specs())


def test_gdrcopy_url_source_needs_a_pinned_sha256_for_each_package_even_when_the_host_sets_nothing():
    """The defaults themselves (source url, no checksum pinned) are refused on every host gpudirect runs on."""
    (problem,) = gdrcopy_problems({})
    assert problem.startswith("n-01: gpudirect_gdrcopy_sha256 pins no file of gdrdrv-dkms, libgdrapi 2.5.1-1, which ")
    assert "or set gpudirect_gdrcopy_source: apt with gpudirect_gdrcopy_repo_url" in problem
    one = {"gpudirect_gdrcopy_sha256": {GDRCOPY_FILES[1]: "sha256:" + "a" * 64}}
    (problem,) = gdrcopy_problems(one)
    assert (
        "pins no file of gdrdrv-dkms 2.5.1-1," in problem
        and "e.g. gdrdrv-dkms_2.5.1-1_amd64.Ubuntu24_04.deb" in problem
    )
    both = {"gpudirect_gdrcopy_sha256": {name: "sha256:" + "a" * 64 for name in GDRCOPY_FILES}}
    assert gdrcopy_problems(both) == []
    # Pinned in the versions file, as a site's mirror file would.
    assert gdrcopy_problems({"versions_gdrcopy_sha256": both["gpudirect_gdrcopy_sha256"]}) == []
    # Pins of another version do not count.
    assert gdrcopy_problems({**both, "gpudirect_gdrcopy_version": "2.6-1"})[0].startswith(
        "n-01: gpudirect_gdrcopy_sha256 pins no file of gdrdrv-dkms, libgdrapi 2.6-1"
    )
    assert gdrcopy_problems({**both, "versions_gdrcopy": "2.6-1"})[0].startswith(
        "n-01: gpudirect_gdrcopy_sha256 pins no file of gdrdrv-dkms, libgdrapi 2.6-1"
    )


def test_gdrcopy_rule_spares_other_sources_and_hosts_gpudirect_does_not_run_on():
    assert gdrcopy_problems({"gpudirect_gdrcopy_source": "apt"}) == []
    assert gdrcopy_problems({"gpudirect_gdrcopy_enabled": False}) == []
    assert gdrcopy_problems({}, rdma_group=[]) == []
    # gpudirect runs on the hosts of doca_ofed_hca_group (playbooks/nodes.yml), when the inventory names another.
    assert len(gdrcopy_problems({"doca_ofed_hca_group": "site_rdma"}, rdma_group=[])) == 1


def test_gdrcopy_checksums_are_sha256_by_file_name():
    (problem,) = gdrcopy_problems({"gpudirect_gdrcopy_source": "apt", "gpudirect_gdrcopy_sha256": {"a b.deb": "md5:1"}})
    assert problem == (
        "n-01: gpudirect_gdrcopy_sha256 must be file names mapped to sha256: and 64 lowercase hex digits, "
        "not a b.deb: 'md5:1', got {'a b.deb': 'md5:1'} (dict)"
    )
    (problem,) = gdrcopy_problems({"versions_gdrcopy_sha256": {GDRCOPY_FILES[0]: "sha256:" + "A" * 64}})
    assert problem.startswith("n-01: versions_gdrcopy_sha256 must be file names mapped to sha256: and 64 lowercase")
