# Railforge - URLs that may carry a login (http://user:password@mirror/), written to nodes without it.
"""Jinja2 filters railforge_url_public (a URL without its login) and railforge_apt_auth (the apt_auth.conf(5) line
that gives apt the login instead; empty when the URL carries none)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit


def railforge_url_public(url: str) -> str:
    """The URL without user and password: safe in a world-readable file and in task output."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def railforge_apt_auth(url: str) -> str:
    """The auth.conf line for the URL's login, or "" without one. The machine names the scheme (without it apt
    matches https only), host, port and path; user and password are percent-decoded, as apt reads them from a URL."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return ""
    login, colon, password = parts.netloc.rpartition("@")[0].partition(":")
    machine = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path.rstrip('/')}"
    return f"machine {machine} login {unquote(login)}" + (f" password {unquote(password)}" if colon else "")


class FilterModule:
    def filters(self):
        return {"railforge_url_public": railforge_url_public, "railforge_apt_auth": railforge_apt_auth}
