"""Node checks shared by Molecule and playbooks/validate.yml.

Under Molecule (MOLECULE_INVENTORY_FILE set) the checks reach the test containers with testinfra's native
podman backend; on real hosts (RAILFORGE_INVENTORY set by playbooks/validate.yml) they go through the
inventory's own Ansible connection. Expected values come from the inventory, over each role's defaults, so
the same check judges a container and a real node.
"""

import importlib.util
import os
import re
from pathlib import Path

import pytest
import yaml
from testinfra.utils.ansible_runner import AnsibleRunner

ROOT = Path(__file__).resolve().parents[2]
PODMAN_CONNECTIONS = ("podman", "containers.podman.podman")
PURE_MODULE = "plugins/module_utils/railforge_inventory.py"


def _runner() -> AnsibleRunner | None:
    inventory = os.environ.get("MOLECULE_INVENTORY_FILE") or os.environ.get("RAILFORGE_INVENTORY")
    return AnsibleRunner(inventory) if inventory else None


def pytest_configure(config: pytest.Config) -> None:
    runner = _runner()
    if config.option.hosts is None and runner is not None:
        hosts = runner.get_hosts(os.environ.get("RAILFORGE_HOSTS", "all"))
        config.option.hosts = ",".join(f"{_scheme(runner, name)}://{name}" for name in hosts)


def _scheme(runner: AnsibleRunner, name: str) -> str:
    """testinfra's native podman backend for containers (fast), else the host's own Ansible connection."""
    if "MOLECULE_INVENTORY_FILE" in os.environ:
        return "podman"
    connection = runner.get_variables(name).get("ansible_connection")
    return "podman" if connection in PODMAN_CONNECTIONS else "ansible"


def _role_defaults() -> dict:
    merged: dict = {}
    for defaults in sorted(ROOT.glob("roles/*/defaults/main.yml")):
        merged.update(yaml.safe_load(defaults.read_text()) or {})
    return merged


def _inventory_checks():
    """plugins/module_utils/railforge_inventory.py (pure Python), for its reading of pinned defaults."""
    spec = importlib.util.spec_from_file_location("railforge_inventory", ROOT / PURE_MODULE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _inventory_name(host) -> str:
    return getattr(host.backend, "name", None) or host.backend.host


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each check's node as a JUnit property, read by railforge.validate: a parametrized check's id adds its own
    parameters after the host's, joined by "-" as host names may be. Set at collection, so that a check a marker
    skips carries it too."""
    for item in items:
        host = getattr(item, "callspec", None) and item.callspec.params.get("_testinfra_host")
        if host:
            item.user_properties.append(("node", _inventory_name(host)))


@pytest.fixture(scope="module")
def inventory_name(host) -> str:
    return _inventory_name(host)


@pytest.fixture(scope="module")
def hostvars(inventory_name) -> dict:
    """The host's expected settings: role defaults overlaid with its inventory variables."""
    runner = _runner()
    merged = {**_role_defaults(), **(runner.get_variables(inventory_name) if runner else {})}
    # A role default that names a pin of roles/versions ("{{ versions_doca }}") expects the pin's value.
    resolve_pins = _inventory_checks().resolve_pins
    return {name: resolve_pins(value, merged.__getitem__) for name, value in merged.items()}


@pytest.fixture(scope="module")
def all_hostvars() -> dict[str, dict]:
    runner = _runner()
    return {name: runner.get_variables(name) for name in runner.get_hosts("all")} if runner else {}


@pytest.fixture(scope="module")
def in_container(host) -> bool:
    return host.run("systemd-detect-virt --container").rc == 0


@pytest.fixture
def needs_host_kernel(in_container) -> None:
    """Skip a check of kernel state, which a container shares with its host."""
    if in_container:
        pytest.skip("container: kernel modules, sysctls, swap and limits belong to the container's host")


@pytest.fixture
def check_signed_apt_source(host):
    """A check of one apt source a role added: signed-by the keyring the role installed after checking the key's
    fingerprint, never trusted=yes, and apt, fetching the source alone into lists of its own (the node's stay as
    they are), verifies its Release signature with that keyring."""

    def check(path: str) -> None:
        line = next(ln for ln in host.file(path).content_string.splitlines() if ln.startswith("deb "))
        assert "trusted=yes" not in line, line
        keyring = re.search(r"signed-by=([^\]\s]+)", line)
        assert keyring and host.file(keyring.group(1)).is_file, line
        update = host.run(
            "d=$(mktemp -d) && chmod 755 $d && mkdir -p $d/lists/partial $d/parts && apt-get update -o Dir::Cache=$d"
            f" -o Dir::State::Lists=$d/lists -o Dir::Etc::SourceList={path} -o Dir::Etc::SourceParts=$d/parts;"
            " rc=$?; rm -rf $d; exit $rc"
        )
        assert update.rc == 0 and "GPG error" not in update.stderr, update.stdout + update.stderr
        assert "InRelease" in update.stdout, update.stdout

    return check
