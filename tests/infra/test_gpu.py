"""Checks of the NVIDIA stack on a GPU node (roles nvidia_driver, cuda_toolkit, nvidia_container_toolkit,
nvidia_dcgm, nvidia_fabricmanager). Expected values come from the inventory over the role defaults; nvidia-smi
output is parsed with railforge_hwparse, the parser the hardware facts use."""

import re
import shlex
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins/module_utils"))
from railforge_hwparse import parse_nvidia_smi_query_csv

ROOT = Path(__file__).resolve().parents[2]
DRIVER_VARS = yaml.safe_load((ROOT / "roles/nvidia_driver/vars/main.yml").read_text())
pytestmark = pytest.mark.gpu
QUERY = ("index", "name", "driver_version", "persistence_mode", "pci.bus_id")


@pytest.fixture(scope="module")
def gpu_count(hostvars) -> int:
    return int(hostvars.get("railforge_gpu_count", 0))


@pytest.fixture(scope="module")
def driver_installed(host, gpu_count, hostvars) -> None:
    if gpu_count == 0:
        pytest.skip("no GPU expected on this host: the NVIDIA stack is skipped")
    if (
        host.file("/etc/apt/preferences.d/railforge-nvidia-driver").exists is False
        and host.package("nvidia-driver-cuda").is_installed
    ):
        pytest.skip("driver preinstalled and left alone (checked by test_preinstalled_driver_left_alone)")


@pytest.fixture(scope="module")
def smi_rows(host, gpu_count) -> list[dict]:
    if gpu_count == 0:
        pytest.skip("no GPU expected on this host")
    out = host.check_output(f"nvidia-smi --query-gpu={','.join(QUERY)} --format=csv,noheader")
    return parse_nvidia_smi_query_csv(out, QUERY)


def is_wanted_driver(version: str, hostvars) -> bool:
    """The pinned exact version (as nvidia-smi reports it, or with a Debian revision), else one of the branch."""
    exact = hostvars["nvidia_driver_version"]
    if exact:
        return version == exact or version.startswith(exact + "-")
    return version.startswith(hostvars["nvidia_driver_branch"] + ".")


def fabric_manager_package(branch: str) -> str:
    """nvidia-fabricmanager-<branch> below 580, nvidia-fabricmanager from 580 (NVIDIA's CUDA repositories)."""
    return "nvidia-fabricmanager" if int(branch) >= 580 else f"nvidia-fabricmanager-{branch}"


def test_no_gpu_host_has_no_driver(host, gpu_count):
    if gpu_count:
        pytest.skip("host has GPUs")
    assert not host.package("nvidia-driver-cuda").is_installed
    assert not host.file("/etc/apt/preferences.d/railforge-nvidia-driver").exists


@pytest.mark.usefixtures("driver_installed")
def test_driver_packages_at_pinned_branch_and_held(host, hostvars):
    listing = host.check_output(r"dpkg-query -W -f='${db:Status-Abbrev}|${Package}|${Version}\n'")
    driver_package = re.compile(DRIVER_VARS["nvidia_driver_package_regex"])
    # Every package versioned with the driver (Debian's and Ubuntu's names alike: nvidia-open, nvidia-utils-580,
    # nvidia-fabricmanager, libnvidia-nscq ...), whatever its revision.
    driver = [line.split("|") for line in listing.splitlines() if "|" in line]
    driver = [
        (status.strip(), name, version)
        for status, name, version in driver
        if driver_package.match(name) and re.match(r"[0-9]{3}\.", version)
    ]
    assert driver, "no driver package installed"
    for status, name, version in driver:
        assert is_wanted_driver(version, hostvars), f"{name} {version}"
        assert status == "hi", f"{name} is not held ({status})"


@pytest.mark.usefixtures("driver_installed")
def test_no_package_of_another_driver_branch_left(host, hostvars):
    driver_package = re.compile(DRIVER_VARS["nvidia_driver_package_regex"])
    listing = host.check_output(r"dpkg-query -W -f='${Package} ${Version}\n'").splitlines()
    other = [
        line
        for line in listing
        if driver_package.match(line)
        and re.match(r"[0-9]{3}\.", line.split()[1])
        and not line.split()[1].startswith(hostvars["nvidia_driver_branch"] + ".")
    ]
    assert not other, other


@pytest.mark.usefixtures("driver_installed")
def test_nouveau_blacklisted(host):
    assert "blacklist nouveau" in host.file("/etc/modprobe.d/railforge-blacklist-nouveau.conf").content_string


@pytest.mark.hardware
@pytest.mark.usefixtures("needs_host_kernel")
def test_nouveau_not_loaded_and_nvidia_loaded(host):
    modules = {line.split()[0] for line in host.check_output("lsmod").splitlines()[1:]}
    assert "nouveau" not in modules
    assert "nvidia" in modules


def test_nvidia_smi_gpu_count_and_driver_version(smi_rows, gpu_count, hostvars, host):
    assert len(smi_rows) == gpu_count
    for row in smi_rows:
        assert is_wanted_driver(row["driver_version"], hostvars), row
    if hostvars.get("railforge_gpu_product"):
        assert {row["name"] for row in smi_rows} == {hostvars["railforge_gpu_product"]}


@pytest.mark.usefixtures("driver_installed")
def test_persistence_mode_on(smi_rows, host):
    assert host.service("nvidia-persistenced").is_enabled
    assert all(row["persistence_mode"] == "Enabled" for row in smi_rows), smi_rows


@pytest.mark.parametrize(
    ("source", "trusted_variable"),
    [
        ("/etc/apt/sources.list.d/railforge-cuda.list", "nvidia_driver_repo_trusted"),
        ("/etc/apt/sources.list.d/railforge-nvidia-container-toolkit.list", "nvidia_container_toolkit_repo_trusted"),
    ],
)
def test_repository_signature_checked_by_apt(host, hostvars, check_signed_apt_source, source, trusted_variable):
    if not host.file(source).exists or hostvars[trusted_variable]:
        pytest.skip("the role added no such source here, or a trusted one was asked for")
    check_signed_apt_source(source)


def test_cuda_toolkits_and_default(host, hostvars):
    if not host.file("/etc/profile.d/cuda.sh").exists:
        pytest.skip("cuda_toolkit not applied to this host")
    for version in hostvars["cuda_toolkit_versions"]:
        nvcc = host.check_output(f"/usr/local/cuda-{version}/bin/nvcc --version")
        assert f"release {version}," in nvcc
    default = hostvars["cuda_toolkit_default_version"]
    assert host.file("/usr/local/cuda").linked_to == f"/usr/local/cuda-{default}"
    assert f"release {default}," in host.check_output("bash -lc 'nvcc --version'")
    assert not host.package("cuda-drivers").is_installed or host.package("nvidia-open").is_installed


def test_container_toolkit_packages_at_pinned_version_and_held(host, hostvars):
    if not host.service("railforge-nvidia-cdi").is_enabled:
        pytest.skip("nvidia_container_toolkit not applied to this host")
    packages = yaml.safe_load((ROOT / "roles/nvidia_container_toolkit/vars/main.yml").read_text())
    for name in packages["nvidia_container_toolkit_packages"]:
        status, version = host.check_output(f"dpkg-query -W -f='${{db:Status-Abbrev}}|${{Version}}' {name}").split("|")
        assert version == hostvars["nvidia_container_toolkit_version"], name
        assert status.strip() == "hi", f"{name} is not held ({status})"


def test_containerd_has_nvidia_runtime_and_keeps_user_config(host, hostvars):
    dropin = host.file("/etc/containerd/conf.d/99-railforge-nvidia.toml")
    if not dropin.exists:
        pytest.skip("nvidia_container_toolkit not applied to this host")
    config = tomllib.loads(host.file("/etc/containerd/config.toml").content_string)
    assert "/etc/containerd/conf.d/*.toml" in config["imports"]
    settings = tomllib.loads(dropin.content_string)
    # the CRI plugin's name in each config version: 2 (containerd 1.x and 2.x), 3 (containerd 2.x)
    cri = {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}[settings["version"]]
    assert settings["version"] == config["version"], "the drop-in's version differs from config.toml's"
    runtime = settings["plugins"][cri]["containerd"]
    assert runtime["runtimes"]["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert (runtime.get("default_runtime_name") == "nvidia") == hostvars["nvidia_container_toolkit_default_runtime"]
    for backup in host.run("ls /etc/containerd/config.toml.*~ 2>/dev/null").stdout.split():
        for key, value in tomllib.loads(host.file(backup).content_string).items():
            assert config[key] == value, f"containerd setting lost: {key}"


def test_docker_has_nvidia_runtime_and_keeps_user_config(host):
    daemon = host.file("/etc/docker/daemon.json")
    if not daemon.exists or "nvidia" not in daemon.content_string:
        pytest.skip("no docker on this host")
    assert '"max-size": "10m"' in daemon.content_string
    assert '"path": "nvidia-container-runtime"' in daemon.content_string


def test_cdi_spec_lists_every_gpu_and_follows_boot(host, gpu_count, hostvars):
    unit = host.service("railforge-nvidia-cdi")
    if not unit.is_enabled:
        pytest.skip("nvidia_container_toolkit not applied to this host")
    spec = yaml.safe_load(host.file(hostvars["nvidia_container_toolkit_cdi_spec"]).content_string)
    names = {device["name"] for device in spec["devices"]}
    assert {str(i) for i in range(gpu_count)} | {"all"} <= names


def test_dcgm_host_engine_answers(host):
    if not host.package("datacenter-gpu-manager-4-core").is_installed:
        pytest.skip("nvidia_dcgm not applied to this host")
    assert host.service("nvidia-dcgm").is_running
    assert host.run("dcgmi discovery -l").rc == 0


def test_fabric_manager_on_nvswitch_systems(host, hostvars):
    root = hostvars["nvidia_fabricmanager_hw_root"].rstrip("/") + "/sys/bus/pci/devices"
    nvswitch = host.run(f"grep -l 0x0680 {root}/*/class").stdout.strip()
    package = host.package(fabric_manager_package(hostvars["nvidia_driver_branch"]))
    if not nvswitch:
        assert not package.is_installed
        pytest.skip("no NVSwitch on this host")
    # The driver's upstream version: its revision (Ubuntu's -0ubuntu1) may differ from the fabric manager's (-1).
    smi_owner = host.check_output("dpkg-query -S /usr/bin/nvidia-smi").split(":")[0]
    driver = host.package(smi_owner).version.split("-")[0]
    assert package.version.split("-")[0] == driver, "fabric manager must match the driver's version"
    assert host.service("nvidia-fabricmanager").is_running
    branch = hostvars["nvidia_driver_branch"]
    nscq = "libnvidia-nscq" if int(branch) >= 580 else f"libnvidia-nscq-{branch}"
    assert host.package(nscq).version.split("-")[0] == driver


def test_preinstalled_driver_left_alone(host, hostvars, gpu_count):
    """A node already running the wanted driver (like DGX OS) is not touched: no pin, blacklist or source."""
    if gpu_count == 0 or host.file("/etc/apt/preferences.d/railforge-nvidia-driver").exists:
        pytest.skip("not a preinstalled-driver host")
    assert is_wanted_driver(host.package("nvidia-driver-cuda").version, hostvars)
    assert not host.file("/etc/modprobe.d/railforge-blacklist-nouveau.conf").exists
    assert not host.file("/etc/apt/sources.list.d/railforge-cuda.list").exists


EXPORTER_UNIT = "/etc/systemd/system/railforge-dcgm-exporter.service"
METRIC = re.compile(r"^(DCGM_FI_\w+)\{([^}]*)\}\s+(\S+)$")


@pytest.fixture(scope="module")
def exporter_metrics(host, hostvars) -> list[tuple[str, dict, float]]:
    """The host dcgm-exporter's /metrics as (metric, labels, value), scraped on the node itself (retried while the
    exporter starts)."""
    if not hostvars["nvidia_dcgm_exporter_enabled"]:
        pytest.skip("host dcgm-exporter not enabled on this host")
    address = hostvars["nvidia_dcgm_exporter_listen_address"] or "127.0.0.1"
    url = f"http://{f'[{address}]' if ':' in address else address}:{hostvars['nvidia_dcgm_exporter_port']}/metrics"
    scrape = (
        "import sys, time, urllib.request\n"
        "for attempt in range(15):\n"
        "    try:\n"
        "        body = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()\n"
        "    except OSError:\n"
        "        time.sleep(2)\n"
        "    else:\n"
        "        print(body)\n"
        "        sys.exit(0)\n"
        "sys.exit(1)\n"
    )
    out = host.check_output(f"python3 -c {shlex.quote(scrape)} {url}")
    metrics = []
    for line in out.splitlines():
        if match := METRIC.match(line):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
            metrics.append((match.group(1), labels, float(match.group(3))))
    return metrics


def test_dcgm_exporter_unit_only_where_enabled(host, hostvars):
    """No exporter unit of ours where it is off (one left by an earlier run is removed); a site's own unit stays."""
    if hostvars["nvidia_dcgm_exporter_enabled"]:
        pytest.skip("host dcgm-exporter enabled on this host")
    assert not host.file(EXPORTER_UNIT).exists
    assert not host.file("/etc/railforge/dcgm-exporter-collectors.csv").exists
    if hostvars.get("test_site_exporter_unit"):
        assert host.service(hostvars["test_site_exporter_unit"]).is_running


def test_dcgm_exporter_runs_unprivileged(host, hostvars):
    if not hostvars["nvidia_dcgm_exporter_enabled"]:
        pytest.skip("host dcgm-exporter not enabled on this host")
    service = host.service("railforge-dcgm-exporter")
    assert service.is_enabled
    assert service.is_running
    pid = host.check_output("systemctl show -p MainPID --value railforge-dcgm-exporter")
    assert host.file(f"/proc/{pid}").uid != 0, "the exporter runs as root"
    settings = host.check_output(
        "systemctl show -p NoNewPrivileges,ProtectSystem,CapabilityBoundingSet railforge-dcgm-exporter"
    )
    assert {"NoNewPrivileges=yes", "ProtectSystem=strict", "CapabilityBoundingSet="} <= set(settings.splitlines())
    assert not host.service("nvidia-dcgm-exporter").is_running, "the packaged (root) exporter runs too"


def test_dcgm_exporter_serves_the_configured_fields_for_every_gpu(host, hostvars, exporter_metrics, smi_rows):
    """The unit's flags reach the binary: it listens where configured, serves exactly the fields of our CSV (not
    the package's list), read from the host engine, for every GPU the driver lists."""
    address = hostvars["nvidia_dcgm_exporter_listen_address"]
    port = hostvars["nvidia_dcgm_exporter_port"]
    assert host.socket(f"tcp://{address}:{port}" if address else f"tcp://{port}").is_listening
    configured = {collector["field"] for collector in hostvars["nvidia_dcgm_exporter_collectors"]}
    assert {name for name, _, _ in exporter_metrics} == configured
    temperature_gpus = {labels["gpu"] for name, labels, _ in exporter_metrics if name == "DCGM_FI_DEV_GPU_TEMP"}
    assert temperature_gpus == {str(row["index"]) for row in smi_rows}


@pytest.mark.hardware
@pytest.mark.usefixtures("needs_host_kernel")
def test_dcgm_exporter_reports_the_expected_gpus(exporter_metrics, gpu_count):
    """On a real node: a plausible temperature for as many GPUs as the inventory says the node has."""
    temperatures = [value for name, _, value in exporter_metrics if name == "DCGM_FI_DEV_GPU_TEMP"]
    assert len(temperatures) == gpu_count
    assert all(0 < value < 110 for value in temperatures), temperatures
