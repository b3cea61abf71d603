"""Kubernetes resource quantities ("500m", "16Gi", "1e3", 8) as the core's integer units.

CPU in millicores, memory and storage in bytes, everything else (nvidia.com/gpu, rdma/rail0, pods) as a whole
count. Fractions round up, as the kubelet accounts them: a request of 0.1m CPU still takes 1m.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Decimal

from railforge.scheduler import CPU

_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei)|([numkMGTPE])|[eE]([+-]?\d+))?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BYTE_RESOURCES = ("memory", "ephemeral-storage")


def parse_quantity(text: object) -> Decimal:
    """The value of a quantity; ValueError names what was given and the expected form."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise ValueError(f"{text!r} is not a quantity; expected a number or a string such as 500m, 16Gi, 8")
    value = _parsed(str(text).strip())
    if value is None:
        raise ValueError(f"{text!r} is not a quantity; expected a number with an optional suffix (500m, 16Gi, 1e3)")
    return value


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Decimal | None:
    """The value of a quantity's text, or None; kept, as a cluster's pods repeat a few quantities on every pass."""
    match = _QUANTITY.match(text)
    if match is None:
        return None
    number, binary, decimal, exponent = match.groups()
    value = Decimal(number)  # the pattern admits only valid decimals
    if binary:
        return value * _BINARY[binary]
    if decimal:
        return value.scaleb(_DECIMAL[decimal])
    if exponent:
        return value.scaleb(int(exponent))
    return value


def resource_amount(resource: str, text: object) -> int:
    """A quantity of ``resource`` in the core's unit, rounded up; negative amounts are refused."""
    value = parse_quantity(text)
    if value < 0:
        raise ValueError(f"{text!r} is negative; expected an amount >= 0")
    if resource == CPU:
        value *= 1000
    return math.ceil(value)


def resource_map(quantities: object, field: str) -> dict[str, int]:
    """A ``{resource: quantity}`` mapping in core units; ValueError names ``field[resource]`` that is wrong."""
    if not isinstance(quantities, dict):
        raise ValueError(f"{field} is {quantities!r}; expected a mapping of resource name to quantity")
    amounts = {}
    for name, text in quantities.items():
        try:
            amounts[name] = resource_amount(name, text)
        except ValueError as error:
            raise ValueError(f"{field}[{name}]: {error}") from None
    return amounts
