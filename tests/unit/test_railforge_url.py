"""The URL filters (plugins/filter/railforge_url.py): a login is taken out of a URL written to a node, and given to
apt in the apt_auth.conf(5) form it matches (the scheme named: without one apt matches https only)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins/filter"))

from railforge_url import railforge_apt_auth, railforge_url_public

CASES = {
    "proxy with login": (
        "http://ops:s3cret@proxy.example.internal:3128/",
        "http://proxy.example.internal:3128/",
        "machine http://proxy.example.internal:3128 login ops password s3cret",
    ),
    "mirror with a path": (
        "https://ops:s3cret@mirror.example.internal/doca/3.2.1/debian12/x86_64/",
        "https://mirror.example.internal/doca/3.2.1/debian12/x86_64/",
        "machine https://mirror.example.internal/doca/3.2.1/debian12/x86_64 login ops password s3cret",
    ),
    "percent-encoded password with @ and :": (
        "http://ops:p%40ss%3Aword@proxy:3128",
        "http://proxy:3128",
        "machine http://proxy:3128 login ops password p@ss:word",
    ),
    "user without password": (
        "http://ops@proxy:3128",
        "http://proxy:3128",
        "machine http://proxy:3128 login ops",
    ),
}


@pytest.mark.parametrize(("url", "public", "auth"), CASES.values(), ids=CASES.keys())
def test_a_login_moves_from_the_url_to_the_auth_line(url, public, auth):
    assert railforge_url_public(url) == public
    assert railforge_apt_auth(url) == auth


@pytest.mark.parametrize("url", ["http://proxy.example.internal:3128", "file:///srv/mirror/doca/", "$(ARCH)/x"])
def test_a_url_without_login_is_left_as_it_is(url):
    assert railforge_url_public(url) == url
    assert railforge_apt_auth(url) == ""
