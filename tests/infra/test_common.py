"""Checks of the common role's node state (OS preparation of a GPU Kubernetes node)."""

import re
import shlex

import pytest

pytestmark = pytest.mark.common

ENV_BLOCK = re.compile(r"# BEGIN RAILFORGE PROXY.*?# END RAILFORGE PROXY[^\n]*\n?", re.S)
# scheme://user[:password]@ of a URL that carries a login; group 2 is the login.
LOGIN = re.compile(r"^([a-z]+://)([^/@]+)@")
SWAP_LINE = re.compile(r"^\s*[^#\s]\S*\s+\S+\s+swap\s", re.M)


def backups(host, path: str) -> list[str]:
    """Ansible's backups of `path` (path.<pid>.<timestamp>~), oldest first."""
    listing = host.run(f"ls -1tr {path}.*~ 2>/dev/null").stdout.split()
    return [host.file(name).content_string for name in listing]


def test_base_packages_and_extras_installed(host, hostvars):
    for name in ["ca-certificates", "curl", "jq", "chrony", *hostvars["common_extra_packages"]]:
        assert host.package(name).is_installed, name


def test_chrony_enabled_with_configured_servers(host, hostvars, in_container):
    assert host.service("chrony").is_enabled
    if not in_container:
        assert host.service("chrony").is_running
    sources = host.file("/etc/chrony/sources.d/railforge.sources")
    if hostvars["common_ntp_servers"]:
        for server in hostvars["common_ntp_servers"]:
            assert f"server {server} iburst" in sources.content_string
    else:
        assert not sources.exists


def test_hostname_is_inventory_name(host, hostvars, inventory_name):
    if hostvars["common_manage_hostname"]:
        assert host.check_output("hostname") == inventory_name


def test_etc_hosts_lists_every_cluster_host(host, all_hostvars):
    hosts = host.file("/etc/hosts").content_string
    for name, variables in all_hostvars.items():
        address = variables.get("railforge_node_ip", variables.get("ansible_host", name))
        assert re.search(rf"^{re.escape(address)} {re.escape(name)}$", hosts, re.M), f"{address} {name}"


def test_swap_off_in_fstab_and_original_kept(host):
    fstab = host.file("/etc/fstab").content_string
    assert not SWAP_LINE.search(fstab), "an active swap entry is left in /etc/fstab"
    for original in backups(host, "/etc/fstab"):
        for line in original.splitlines():
            assert line in fstab, f"fstab line lost: {line!r}"
    assert host.run("systemctl is-enabled swap.target").stdout.strip() == "masked"


@pytest.mark.usefixtures("needs_host_kernel")
def test_no_active_swap(host):
    assert host.file("/proc/swaps").content_string.strip().count("\n") == 0


def test_kernel_modules_persisted(host, hostvars):
    persisted = host.file("/etc/modules-load.d/railforge-kubernetes.conf").content_string.split()
    assert set(hostvars["common_kernel_modules"]) <= set(persisted)


@pytest.mark.usefixtures("needs_host_kernel")
def test_kernel_modules_loaded(host, hostvars):
    loaded = {line.split()[0] for line in host.check_output("lsmod").splitlines()[1:]}
    assert set(hostvars["common_kernel_modules"]) <= loaded


def test_sysctls_persisted(host, hostvars):
    persisted = host.file("/etc/sysctl.d/90-railforge-kubernetes.conf").content_string
    for key, value in hostvars["common_sysctls"].items():
        assert re.search(rf"^{re.escape(key)}\s*=\s*{value}$", persisted, re.M), key


@pytest.mark.usefixtures("needs_host_kernel")
def test_sysctls_applied(host, hostvars):
    for key, value in hostvars["common_sysctls"].items():
        assert host.sysctl(key) == value, key


def test_memlock_unlimited_for_users_and_services(host, hostvars):
    limits = host.file("/etc/security/limits.d/90-railforge-memlock.conf")
    manager = host.file("/etc/systemd/system.conf.d/90-railforge-memlock.conf")
    if hostvars["common_memlock_unlimited"]:
        assert re.search(r"^\*\s+hard\s+memlock\s+unlimited$", limits.content_string, re.M)
        assert "DefaultLimitMEMLOCK=infinity" in manager.content_string
        assert host.check_output("systemctl show -p DefaultLimitMEMLOCK") == "DefaultLimitMEMLOCK=infinity"
    else:
        assert not limits.exists
        assert not manager.exists


def test_proxy_applied_to_apt_and_environment(host, hostvars):
    http, https = hostvars["common_http_proxy"], hostvars["common_https_proxy"]
    environment = host.file("/etc/environment").content_string
    apt = host.file("/etc/apt/apt.conf.d/90railforge-proxy")
    if not (http or https):
        assert not apt.exists
        assert "RAILFORGE PROXY" not in environment
        return
    if http:
        assert f'Acquire::http::Proxy "{without_login(http)}";' in apt.content_string
        assert f"http_proxy={http}" in environment.splitlines()
    if https:
        assert f'Acquire::https::Proxy "{without_login(https)}";' in apt.content_string
        assert f"HTTPS_PROXY={https}" in environment.splitlines()
    assert f"no_proxy={','.join(hostvars['common_no_proxy'])}" in environment.splitlines()


def without_login(url: str) -> str:
    return LOGIN.sub(r"\1", url)


def test_a_proxy_password_is_only_in_root_only_files(host, hostvars):
    """apt's proxy settings (world-readable) carry no password: apt gets the login from a 0600 auth.conf.d file;
    /etc/environment, which must hold the whole URL, is root-only while it does."""
    proxies = [url for url in (hostvars["common_http_proxy"], hostvars["common_https_proxy"]) if LOGIN.match(url)]
    auth = host.file("/etc/apt/auth.conf.d/90railforge-proxy.conf")
    if not proxies:
        assert not auth.exists
        return
    assert (auth.user, auth.group, auth.mode) == ("root", "root", 0o600)
    environment = host.file("/etc/environment")
    assert (environment.user, environment.group, environment.mode) == ("root", "root", 0o640)
    for url in proxies:
        login, _, password = LOGIN.match(url).group(2).partition(":")
        assert f"login {login} password {password}" in auth.content_string
        found = host.run(f"grep -rlF -- {shlex.quote(password)} /etc").stdout.split()
        readable = [path for path in found if host.file(path).mode & 0o004]
        assert readable == [], f"world-readable files hold the proxy password: {readable}"


def test_environment_user_lines_kept(host):
    current = ENV_BLOCK.sub("", host.file("/etc/environment").content_string).splitlines()
    for original in backups(host, "/etc/environment"):
        for line in ENV_BLOCK.sub("", original).splitlines():
            assert line in current, f"/etc/environment line lost: {line!r}"


def test_packages_came_through_the_stand_in_proxy(host, hostvars):
    """Molecule only: the stand-in proxy of molecule/common logged the node's apt traffic."""
    log = host.file("/var/log/forward-proxy.log")
    if not log.exists:
        pytest.skip("no stand-in proxy on this node (real hosts use the site's proxy)")
    assert hostvars["common_http_proxy"], "the stand-in proxy runs but no proxy is configured"
    login = LOGIN.match(hostvars["common_http_proxy"])
    user = f" user={login.group(2).partition(':')[0]}" if login else ""
    assert re.search(rf"^GET http://\S+/chrony_\S+\.deb{re.escape(user)}$", log.content_string, re.M)
