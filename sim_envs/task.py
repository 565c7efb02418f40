"""The `Task` contract: everything the rest of the toolkit needs to know about one robot task.

Why a frozen dataclass of plain callables: tasks are data. A family module fills in the callables
once; a user task file can derive a new task from an existing one with `dataclasses.replace`, and
nothing downstream needs to know which family it came from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from sim_envs.object_facts import object_facts_text
from sim_envs.scene_features import FeatureSpec, scene_text
from sim_envs.success_rule import SuccessRule
from sim_envs.view_base import StateView, render_view_class_doc

if TYPE_CHECKING:  # annotations only: importing sim_envs does not load Gymnasium (~0.1 s)
    import gymnasium as gym

SuccessMode = Literal["any", "final"]


@dataclass(frozen=True)
class KeypointSetup:
    """How keypoint rewards (text2reward.keypoints) see and reach this task: the camera a vision model is shown,
    the view path of the end effector a reward moves, the parts a keypoint can be anchored to (so it follows them),
    and the true points the oracle projects. Paths are attribute paths of the task's view, as in `scale_points`."""

    camera: str
    upside_down: bool = False
    """The camera renders the scene upside down (MetaWorld's corner cameras): its images are turned 180 degrees."""
    effector: str = "robot.ee_position"
    anchors: tuple[tuple[str, str, str], ...] = (
        ("obj", "obj.position", "the task's object (see the task notes); a point on it moves with it"),
        ("obj_start", "obj.init_position", "where the object was placed at the start of the episode"),
        ("goal", "goal_position", "the goal the task's success is measured against (placed anew each episode)"),
    )
    """(name, view path of its position, what it is): a keypoint anchored to a name keeps its offset from that
    position, so it moves with the part and follows each episode's placement."""
    oracle: tuple[tuple[str, str, str | None], ...] = (("grasp", "obj.position", "obj"), ("target", "goal_position", "goal"))
    """(keypoint, view path of its true position, anchor or None): what `--keypoints oracle` projects."""

    @property
    def wants_grasp(self) -> bool:
        """An object to take hold of (a reach has none: the end effector itself goes to the target)."""
        return any(name == "grasp" for name, _, _ in self.oracle)

    @property
    def anchor_names(self) -> tuple[str, ...]:
        return tuple(name for name, _, _ in self.anchors)


REACH_ANCHORS: tuple[tuple[str, str, str], ...] = (
    ("goal", "goal_position", "the goal the task's success is measured against (placed anew each episode)"),
)
REACH_ORACLE: tuple[tuple[str, str, str | None], ...] = (("target", "goal_position", "goal"),)
"""A reaching task: no object to grasp, the end effector itself goes to the goal."""
ScriptedPolicy = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Task:
    """One task: a description, an environment, a state view, a success test and references."""

    id: str
    family: str
    description: str
    env_factory: Callable[..., gym.Env] = field(repr=False)
    """`env_factory(render_mode=None, seed=None, **env_kwargs)` -> an env with its time limit. A factory
    with a `max_episode_steps` parameter lets `derive_task` change the episode length."""
    view_class: type[StateView] = field(repr=False)
    read_view: Callable[[gym.Env, Any], StateView] = field(repr=False)
    """`read_view(unwrapped_env, previous_view)`: the view after reset (previous None) or a step. The
    previous view is the one this reader returned (typed Any: each family's reader takes its own view class)."""
    is_success: Callable[[StateView, dict[str, Any]], bool] = field(repr=False)
    """Per-step success predicate; `success_mode` says how steps make an episode's success."""
    success_doc: str
    success_mode: SuccessMode = "any"
    max_episode_steps: int = 500
    default_steps: int = 20_000
    expert_reward_doc: str | None = None
    """What the environment's own dense reward is; None when the task has no expert reward."""
    scripted_policy_factory: Callable[[], ScriptedPolicy] | None = field(default=None, repr=False)
    action_doc: str = ""
    view_notes: str = ""
    """Task-specific meaning of view fields (e.g. what `obj` is in this task)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    source: str = "builtin"
    success_rule: SuccessRule | None = field(default=None, repr=False)
    """The success test as a predicate over the view with named constants (what the prompt states). Where the
    simulator's flag is the judge (`is_success` reads `info`), tests check that this rule agrees with it."""
    scale_points: tuple[tuple[str, str, str], ...] = ()
    """(label, view path, view path) pairs whose typical initial distance the prompt states, e.g.
    ("gripper to object", "robot.ee_position", "obj.position")."""
    goal_success: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = field(default=None, repr=False)
    """For multi-goal envs (observations `observation`, `achieved_goal`, `desired_goal`): the success test on
    batches of goal vectors, `goal_success(achieved, desired) -> bool array`, what hindsight relabelling (HER)
    needs to score a replayed step against a goal it was not aiming at. None for tasks without goals."""
    keypoints: KeypointSetup | None = field(default=None, repr=False)
    """Set where keypoint rewards apply (an arm with an end effector and an object); None elsewhere."""
    budget_note: str = ""
    """What a budget that learns this task looks like, when it is far above `default_steps` (shown by `t2r tasks --show`)."""
    hyperparams_file: Path | None = None
    """The training settings of this task's family, a YAML file in the format of `policies/hyperparams/<family>.yml`:
    how a family defined in a task file (outside this package) brings its own. None: the package's file for the family.
    Every task of a family names the same file, and a built-in family keeps the package's (sim_envs.registry)."""
    scene_features: tuple[FeatureSpec, ...] | None = field(default=None, repr=False)
    """The scene's fixed features (walls, the table's edges, a net...) as MuJoCo bodies or geoms
    (sim_envs.scene_features): the prompt states where they are and how big, the analysis where the object ended
    relative to them. None: this task does not describe its scene; (): it has no fixed features."""

    @property
    def is_multi_goal(self) -> bool:
        return self.goal_success is not None

    @property
    def has_expert_reward(self) -> bool:
        return self.expert_reward_doc is not None

    @property
    def has_scripted_policy(self) -> bool:
        return self.scripted_policy_factory is not None

    def make_env(self, render_mode: str | None = None, seed: int | None = None, render_size: int | None = None) -> gym.Env:
        """A fresh environment for this task (observations are the env's own)."""
        extra = {} if render_size is None else {"size": render_size}
        return self.env_factory(render_mode=render_mode, seed=seed, **extra, **self.env_kwargs)

    def view(self, env: gym.Env, previous: StateView | None = None) -> StateView:
        """Read the state view from the simulator; `previous` carries episode-start values. `task_success` is
        the success rule's verdict here (the training wrapper sets the judge's own after a step)."""
        view = self.read_view(env.unwrapped, previous)
        view.task_success = self.success_rule(view) if self.success_rule is not None else False
        return view

    def scripted_policy(self) -> ScriptedPolicy:
        if self.scripted_policy_factory is None:
            from sim_envs.errors import ConfigError

            raise ConfigError(f"task {self.id} has no scripted policy; pick one listed with `t2r tasks`")
        return self.scripted_policy_factory()

    def summary(self) -> dict[str, Any]:
        """The JSON form listed by `t2r tasks --json`."""
        return {
            "id": self.id,
            "family": self.family,
            "description": self.description,
            "has_expert_reward": self.has_expert_reward,
            "has_scripted_policy": self.has_scripted_policy,
            "max_episode_steps": self.max_episode_steps,
            "default_steps": self.default_steps,
            "success": self.success_doc,
            "source": self.source,
        }


def render_view_doc(task: Task) -> str:
    """The environment section of a prompt: the view classes, the action, task notes, (built-in tasks) each
    tracked object's measured size and where its tracked point sits in it (sim_envs.object_facts), and the scene's
    fixed features read from MuJoCo (sim_envs.scene_features), one line each."""
    parts = [
        f"# In compute_dense_reward(self, action), `self` is a {task.view_class.__name__}.",
        "# Every array is a read-only numpy float64 copy; positions are metres in the world frame, z up.",
        render_view_class_doc(task.view_class),
    ]
    if task.action_doc:
        parts.append(f"# action: {task.action_doc}")
    if task.view_notes:
        parts.append("# In this task: " + task.view_notes)
    objects = object_facts_text(task.id)
    if objects:
        parts.append("# Object sizes, measured in MuJoCo: " + objects)
    scene = scene_text(task)
    if scene:
        parts.append(scene)
    return "\n\n".join(parts)
