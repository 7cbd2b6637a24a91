"""The known-bug zoo: samplers with a declared fate, to show the harness finds bugs and does not cry wolf.

Every member is importable as a spec, ``specverify.zoo:<name with underscores>`` (for example
``specverify.zoo:replacement_from_target``), and is listed in :data:`ZOO` with the verdict the
harness must reach, the families expected to catch it and the smallest budget that does.
"""

from __future__ import annotations

from ._core import ZooSampler
from ._members import MEMBERS

__all__ = ["ZOO", "ZooSampler"]

#: name -> member, in declaration order.
ZOO: dict[str, ZooSampler] = dict(MEMBERS)


def __getattr__(name: str) -> ZooSampler:
    try:
        return ZOO[name.replace("_", "-")]
    except KeyError:
        raise AttributeError(f"specverify.zoo has no member {name!r}") from None


def __dir__() -> list[str]:
    return sorted([*__all__, *(n.replace("-", "_") for n in ZOO)])
