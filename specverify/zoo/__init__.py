"""The known-bug zoo: samplers with a declared fate, to show the harness finds bugs and does not cry wolf.

Every member is importable as a spec, ``specverify.zoo:<name with underscores>`` (for example
``specverify.zoo:replacement_from_target``), and is listed in :data:`ZOO` with the verdict the
harness must reach, the families expected to catch it and the smallest budget that does.
Tree samplers (the tree contract, :mod:`specverify.trees`) are in :data:`TREE_MEMBERS`, one per bug
class of trees (``specverify.zoo:tree_coin_zero_accepts_zero_mass`` and kin); ``specverify zoo``
runs both.  Engines (the engine contract, :mod:`specverify._kinds.engine`) are in :data:`ENGINE_MEMBERS`,
importable the same way (``specverify.zoo:engine_stop_checked_once_per_step``) for ``specverify engine``.
"""

from __future__ import annotations

from typing import Any

# Importing a module registers its members; the zoo lists them in this order.
# isort: off
from . import _production_shapes  # noqa: F401 - the production-shape members, after the small-case ones
from . import _logits_members  # noqa: F401 - the logits-level members
from . import _float_edges  # noqa: F401 - the float-edge members
from . import _rounded  # noqa: F401 - the member below the presets' reach

# isort: on
from ._core import ZooSampler
from ._engines import ENGINE_MEMBERS, EngineMember
from ._members import MEMBERS
from ._trees import TREE_MEMBERS, TreeZooSampler

__all__ = ["ENGINE_MEMBERS", "EngineMember", "TREE_MEMBERS", "TreeZooSampler", "ZOO", "ZooSampler", "member_named"]

#: name -> member, in declaration order.
ZOO: dict[str, ZooSampler] = dict(MEMBERS)


def member_named(name: str) -> ZooSampler:
    """A step member of :data:`ZOO` or a tree member of :data:`TREE_MEMBERS` by name."""
    return ZOO[name] if name in ZOO else TREE_MEMBERS[name]


def __getattr__(name: str) -> Any:
    engine = ENGINE_MEMBERS.get(name.replace("_", "-"))
    if engine is not None:
        return engine.engine
    try:
        return member_named(name.replace("_", "-"))
    except KeyError:
        raise AttributeError(f"specverify.zoo has no member {name!r}") from None


def __dir__() -> list[str]:
    return sorted([*__all__, *(n.replace("-", "_") for n in (*ZOO, *TREE_MEMBERS, *ENGINE_MEMBERS))])
