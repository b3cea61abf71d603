"""What every ``railforge`` subcommand checks in its arguments, in one place.

Argument types (``type=``) refuse bad input while argparse parses, so a command never starts on it; ``Parser``
prints that refusal as one line; ``UsageError`` is bad input found later (a kubeconfig's cluster unreachable, a
file that does not parse), which ``railforge.cli.main`` prints as one line with exit status 2.  Anything else is a
bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

# a name that stays one path component: no separator, no "." or "..", no leading "-"
_COMPONENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# a Kubernetes object name (RFC 1123 label)
_K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class UsageError(Exception):
    """Bad input the user can fix; the message names the argument and what was expected."""


class Parser(argparse.ArgumentParser):
    """argparse's parser with its errors on one line, ``railforge <subcommand>: <message>``, exit status 2; each
    subcommand's parser records its name in ``command_prog`` for ``main``'s messages."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.set_defaults(command_prog=self.prog)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message.removeprefix('argument ')}\n")


def _number(convert: Callable[[str], float], text: str, expected: str, fits: Callable[[float], bool]) -> float:
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not fits(value):  # NaN fits nothing
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    return int(_number(int, text, "a whole number >= 1", lambda value: value >= 1))


def non_negative_int(text: str) -> int:
    return int(_number(int, text, "a whole number >= 0", lambda value: value >= 0))


def positive_float(text: str) -> float:
    return _number(float, text, "a number > 0", lambda value: 0 < value < math.inf)


def non_negative_float(text: str) -> float:
    return _number(float, text, "a number >= 0", lambda value: 0 <= value < math.inf)


def text_file(text: str) -> Path:
    """An existing, readable, non-empty UTF-8 text file."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: expected a file, got a directory")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise argparse.ArgumentTypeError(f"{text}: no such file") from None
    except OSError as error:
        raise argparse.ArgumentTypeError(f"{text}: cannot read it ({error.strerror})") from None
    if not data.strip():
        raise argparse.ArgumentTypeError(f"{text}: the file is empty")
    try:
        if "\0" in data.decode():
            raise UnicodeError
    except UnicodeError:
        raise argparse.ArgumentTypeError(f"{text}: expected a text file (UTF-8), got binary data") from None
    return path


def directory(text: str) -> Path:
    """An existing directory."""
    path = Path(text)
    if not path.is_dir():
        found = "a file" if path.exists() else "nothing there"
        raise argparse.ArgumentTypeError(f"{text}: expected an existing directory, found {found}")
    return path


def _creatable(path: Path, text: str) -> None:
    """Refuse a path whose nearest existing ancestor is not a directory: nothing could be created below it."""
    ancestor = next(parent for parent in path.absolute().parents if parent.exists())
    if not ancestor.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: cannot be created, {ancestor} is a file")


def output_directory(text: str) -> Path:
    """A directory to write into: an existing one, or one that can be created."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: expected a directory to write into, found a file")
    if not path.exists():
        _creatable(path, text)
    return path


def output_file(text: str) -> Path:
    """A file to write: not a directory, and its folder exists or can be created."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: expected a file to write, found a directory")
    if not path.exists():
        _creatable(path, text)
    return path


def path_component(text: str) -> str:
    """A name that becomes part of a file name: it cannot leave the directory it is written into."""
    if not _COMPONENT.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected a name of letters, digits, '.', '_' and '-', got {text!r}")
    return text


def k8s_name(text: str) -> str:
    if not _K8S_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"expected a Kubernetes name (lower-case letters, digits and '-', at most 63), got {text!r}"
        )
    return text


def namespaced_name(text: str) -> str:
    """NAMESPACE/NAME of a namespaced object, both Kubernetes names."""
    namespace, _, name = text.partition("/")
    if not (_K8S_NAME.fullmatch(namespace) and _K8S_NAME.fullmatch(name)):
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, both Kubernetes names, got {text!r}")
    return text


def quantity(text: str) -> str:
    """A positive Kubernetes quantity, e.g. 1100m or 2."""
    from railforge.k8s.quantity import parse_quantity

    try:
        value = parse_quantity(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a quantity > 0, got {text!r}")
    return text


def kubeconfig_client(kubeconfig: Path, argument: str = "--kubeconfig"):
    """An ApiClient from a kubeconfig file (see ``text_file``); UsageError naming the argument when the file is no
    kubeconfig. The API server is not asked (``kube_client`` asks it)."""
    import yaml
    from kubernetes import config

    try:
        if not isinstance(yaml.safe_load(kubeconfig.read_text()), dict):
            raise config.ConfigException("not a YAML mapping")
        return config.new_client_from_config(str(kubeconfig))
    except (yaml.YAMLError, config.ConfigException, TypeError, AttributeError) as error:
        # a mapping whose fields have other types than a kubeconfig's makes the client library fail on them
        detail = " ".join(str(error).split())
        raise UsageError(f"{argument} {kubeconfig}: expected a kubeconfig ({detail})") from None


def kube_client(kubeconfig: Path, argument: str = "--kubeconfig"):
    """An ApiClient from a kubeconfig file (see ``text_file``) whose API server answered; UsageError when it cannot be
    loaded or the server cannot be reached, so a command fails at once rather than retrying until its timeout."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException
    from urllib3.exceptions import HTTPError

    api = kubeconfig_client(kubeconfig, argument)
    try:
        client.VersionApi(api).get_code(_request_timeout=10)
        return api
    except ApiException as error:
        if error.status not in (401, 403):
            return api  # it answered; the version is just not served to these credentials
        reason = f"{error.status} {error.reason}"
    except HTTPError as error:
        reason = str(getattr(error, "reason", None) or error)
    api.close()
    raise UsageError(f"{argument} {kubeconfig}: cannot use the API server {api.configuration.host} ({reason})")
