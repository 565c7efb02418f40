"""text2reward: a language model writes dense rewards for MuJoCo robot tasks; a jail checks them; SB3 trains on them.

The Python front door (`text2reward.api`): `RewardSearch` (its settings typed as `SearchSettings`), `SearchCallback`,
`SearchResult`, `Policy` (`result.policy`: `predict`, `save`, `Policy.load`), `open_run`, `validate_reward`, `train_reward`. They are imported on first use (PEP 562), so `t2r --help` and a training worker
never pay for the loop's imports.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_FRONT_DOOR = ("RewardSearch", "SearchSettings", "SearchCallback", "SearchResult", "SearchStopped", "BestReward", "Policy", "open_run",
               "validate_reward", "train_reward")
__all__ = ["__version__", *_FRONT_DOOR]


def __dir__() -> list[str]:
    """The public names (the front door's among them, though they load on first use) for `dir()` and completion."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})


def __getattr__(name: str) -> Any:
    if name in _FRONT_DOOR:
        from text2reward import api  # deferred: the front door imports the whole loop (~1 s); commands and workers import less

        return getattr(api, name)
    raise AttributeError(f"module 'text2reward' has no attribute {name!r}")
