"""Address ranges of the cluster's secondary networks (rail_networks, sriov_network), checked one way for both.

No Ansible import: the roles' filters load it by path and turn ValueError into their filter error.
"""

import ipaddress


def network_ranges(variable: str, cidrs, count: int, per: str, optional: bool = False) -> list[str]:
    """`cidrs` as normalised network strings once it is a list of `count` networks, one per `per` (rail, pool ...),
    each with no host bits and none overlapping another; with `optional`, "" leaves an entry without a range.

    Raises ValueError naming `variable` (and the index at fault) and what was expected.
    """
    if not isinstance(cidrs, list) or len(cidrs) != count:
        got = len(cidrs) if isinstance(cidrs, list) else type(cidrs).__name__
        raise ValueError(f"{variable}: expected a list of {count} CIDRs, one per {per}; got {got}")
    networks = {}
    for index, cidr in enumerate(cidrs):
        if optional and cidr == "":
            continue
        try:
            networks[index] = ipaddress.ip_network(str(cidr), strict=True)
        except ValueError as error:
            raise ValueError(
                f"{variable}[{index}]: {cidr!r} is no network address/prefix like 10.100.0.0/16 ({error})"
            ) from None
    indexes = sorted(networks)
    for position, i in enumerate(indexes):
        for j in indexes[position + 1 :]:
            first, other = networks[i], networks[j]
            if first.version == other.version and first.overlaps(other):
                raise ValueError(
                    f"{variable}[{i}] {first} and {variable}[{j}] {other} overlap; "
                    f"expected one separate range per {per}"
                )
    return [str(networks[index]) if index in networks else "" for index in range(count)]
