"""Where a run's first rewards come from, as typed specs: the model's code, a program written from the task's
keypoints, or both.

Why a spec: the loop asks each stage's question of one record (find keypoints first? is round 0 the keypoint program?
does the prompt show the keypoints? is the keypoint reward added to every program?) instead of comparing the source's
name in each stage. A new source is a spec plus one `register_reward_source` line.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.choices import Registry, choose_names


@dataclass(frozen=True)
class KeypointFinderSpec:
    """Who places the keypoints (`--keypoints`)."""

    name: str
    summary: str
    asks_backend: bool = False
    """The run's backend points at the scene's image (so it must accept images); else the simulator's true points
    are projected, and no model is asked."""


KEYPOINT_FINDERS: Registry[KeypointFinderSpec] = Registry(
    "keypoint finder", lambda name, specs: f"unknown --keypoints {name!r}: choose {', '.join(f'{s.name} {s.summary}' for s in specs)}")
"""Every keypoint finder by name (policies.choices: one rule set for every pluggable choice)."""
ORACLE = KEYPOINT_FINDERS.register(KeypointFinderSpec("oracle", "(the true points, projected)"))
MODEL = KEYPOINT_FINDERS.register(KeypointFinderSpec("model", "(the backend points at an image; needs --vision)", asks_backend=True))


def keypoint_finder(name: str) -> KeypointFinderSpec:
    """The registered finder `name`, or one line naming the choices."""
    return KEYPOINT_FINDERS.get(name)



@dataclass(frozen=True)
class RewardSourceSpec:
    name: str
    """What `--reward-source` takes and config.json records."""
    summary: str
    uses_keypoints: bool = False
    """The task's keypoints are found (or read back) before round 0: the task needs a keypoint setup."""
    first_round_is_keypoint_program: bool = False
    """Round 0's one candidate is the program written from the keypoints; no model is asked for it."""
    prompt_shows_keypoints: bool = False
    """Round 0's prompt shows the keypoints and their reward."""
    adds_keypoint_reward: bool = False
    """The keypoint reward is added to every program the model writes (unless it already holds it)."""
    report_text: str = ""
    """How a run's report says where its rewards come from; `{keypoints}` is who placed the points (oracle or model)."""

    @property
    def dense_only(self) -> bool:
        """A keypoint program is a dense reward: such a source trains only in the dense mode."""
        return self.uses_keypoints


REWARD_SOURCES: Registry[RewardSourceSpec] = Registry("reward source", choose_names("--reward-source"))
"""Every reward source by name (policies.choices: one rule set for every pluggable choice)."""


def register_reward_source(spec: RewardSourceSpec, replace: bool = False) -> RewardSourceSpec:
    return REWARD_SOURCES.register(spec, replace=replace)


def unregister_reward_source(name: str) -> RewardSourceSpec:
    return REWARD_SOURCES.unregister(name)


def reward_source_specs() -> list[RewardSourceSpec]:
    return REWARD_SOURCES.specs()


def reward_source(name: str) -> RewardSourceSpec:
    return REWARD_SOURCES.get(name)


CODE = register_reward_source(RewardSourceSpec(
    "code", "(the model writes the reward)", report_text="code (the reward author writes the reward)"))
KEYPOINTS = register_reward_source(RewardSourceSpec(
    "keypoints", "(a reward from the task's keypoints, see t2r keypoints)", uses_keypoints=True,
    first_round_is_keypoint_program=True,
    report_text="keypoints (round 0's reward is written by text2reward from {keypoints} keypoints, not by a language model)"))
CODE_AND_KEYPOINTS = register_reward_source(RewardSourceSpec(
    "code+keypoints", "(the model's reward plus the keypoint reward)", uses_keypoints=True, prompt_shows_keypoints=True,
    adds_keypoint_reward=True, report_text="code+keypoints (the model's code, shown {keypoints} keypoints, plus the keypoint reward)"))
