"""Malformed input to role common fails before any change, with a message naming the variable."""

import pytest

CASES = {
    "list given as string": ({"common_ntp_servers": "ntp.example.com"}, "common_ntp_servers"),
    "bool given as word": ({"common_disable_swap": "perhaps"}, "common_disable_swap"),
    "proxy without scheme": (
        {"common_http_proxy": "proxy.example.com:3128"},
        "- common_http_proxy must be a http/https URL like http://proxy.example.com:3128, got 'proxy.example.com:3128'",
    ),
    "bad kernel module": (
        {"common_kernel_modules": ["overlay", "br netfilter"]},
        "- common_kernel_modules[1] must be a kernel module name, got 'br netfilter' (str)",
    ),
    "bad sysctl key": (
        {"common_sysctls": {"ipforward": 1}},
        "- common_sysctls must be sysctl keys like net.ipv4.ip_forward, not 'ipforward'",
    ),
    "missing hosts group": (
        {"common_etc_hosts_group": "gpu_nodez"},
        "- common_etc_hosts_group must be an inventory group, got 'gpu_nodez' (no such group)",
    ),
}


@pytest.mark.parametrize(("variables", "message"), CASES.values(), ids=CASES.keys())
def test_malformed_input_fails_first(run_role, variables, message):
    result = run_role("common", variables)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert message in output
    if message.startswith("- "):  # a line of the one message of railforge_role_input
        assert "Invalid input for role common (nothing was changed):\n" in output
    assert "changed=0" in output


def test_all_value_problems_reported_at_once(run_role):
    result = run_role("common", {"common_http_proxy": "ftp://x", "common_ntp_servers": ["bad host!"]})
    output = result.stdout + result.stderr
    assert "Invalid input for role common (nothing was changed):\n" in output
    assert "\n- common_http_proxy must be a http/https URL" in output
    assert "\n- common_ntp_servers[0] must be an IP address or a host name, got 'bad host!' (str)" in output


def test_a_refused_proxy_url_is_printed_with_its_password_masked(run_role):
    result = run_role("common", {"common_https_proxy": "http://railforge:S3cr3t-Pa55@proxy example.com:3128"})
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "- common_https_proxy must be a http/https URL like http://proxy.example.com:3128, got " in output
    assert "http://railforge:********@proxy example.com:3128" in output
    assert "S3cr3t-Pa55" not in output
