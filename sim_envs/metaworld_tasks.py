"""All 50 MetaWorld v3 tasks (goal-observable Sawyer arm), with their view and scripted policies.

Expert reward = MetaWorld's own dense reward (`compute_reward`, v2 version); success = MetaWorld's
`info["success"]`, whose rule per task is stated (and tested against the flag) in metaworld_success.py. Object and goal placements are re-drawn at every reset from the env's seeded
generator, so a policy has to generalise over placements, as in the MetaWorld benchmark.
"""

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np

from sim_envs.metaworld_success import METAWORLD_RULES
from sim_envs.metaworld_view import SawyerObject, SawyerRobot, SawyerView
from sim_envs.scale_hints import ARM_SCALE_POINTS, REACH_SCALE_POINTS
from sim_envs.scene_features import METAWORLD_FEATURES
from sim_envs.task import REACH_ANCHORS, REACH_ORACLE, KeypointSetup, Task
from sim_envs.view_base import StateView, frozen

if TYPE_CHECKING:
    from metaworld.policies.policy import Policy
    from metaworld.sawyer_xyz_env import SawyerXYZEnv

EPISODE_STEPS = 200
"""Shorter than MetaWorld's 500-step cap: every scripted policy succeeds well inside it (see tests),
and SAC learns faster on short episodes (benchmarks/expert_baselines.py)."""


ACTION_DOC = (
    "np.ndarray (4,) in [-1, 1]: action[:3] moves the hand (x, y, z; 1 = 1 cm per step), "
    "action[3] closes (+1) or opens (-1) the gripper"
)

# name -> (what a person would ask for, what `obj`/`obj2` are in this task)
METAWORLD_TASKS: dict[str, tuple[str, str]] = {
    "assembly": ("Pick up the round nut by its handle and put it onto the peg.", "obj is the nut's handle; the goal is on the peg"),
    "basketball": ("Pick up the basketball and dunk it into the hoop.", "obj is the ball; the goal is the hoop"),
    "bin-picking": ("Pick the cube out of the left bin and place it into the right bin.", "obj is the cube; the goal is the centre of the right bin"),
    "box-close": ("Pick up the box lid and put it on the box.", "obj is the lid's handle; the goal is on top of the box"),
    "button-press-topdown": ("Press the button down from above.", "obj is the button top; the goal is its pressed position"),
    "button-press-topdown-wall": ("Press the button down from above; a wall stands beside it.", "obj is the button top; the goal is its pressed position"),
    "button-press": ("Push the button on the box in front of the robot.", "obj is the button face; the goal is its pressed position"),
    "button-press-wall": ("Push the button on the box; a short wall stands in front of it.", "obj is the button face; the goal is its pressed position"),
    "coffee-button": ("Press the button on the coffee machine.", "obj is the button; the goal is its pressed position"),
    "coffee-pull": ("Pull the mug out from under the coffee machine to the goal.", "obj is the mug; the goal is where the mug should end"),
    "coffee-push": ("Push the mug under the coffee machine's spout.", "obj is the mug; the goal is under the spout"),
    "dial-turn": ("Turn the dial a quarter turn.", "obj is a point on the dial's rim; the goal is where that point ends after the turn"),
    "disassemble": ("Lift the round nut off the peg.", "obj is the nut's handle; the goal is above the peg"),
    "door-close": ("Push the open door shut.", "obj is the door handle; the goal is the handle's closed position"),
    "door-lock": ("Lock the door by turning the lock knob down.", "obj is the lock knob; the goal is its locked position"),
    "door-open": ("Pull the door open by its handle.", "obj is the door handle; the goal is the handle's open position"),
    "door-unlock": ("Unlock the door by turning the lock knob up.", "obj is the lock knob; the goal is its unlocked position"),
    "hand-insert": ("Push the block into the hole in the table.", "obj is the block; the goal is in the hole"),
    "drawer-close": ("Push the drawer closed.", "obj is the drawer handle; the goal is the handle's closed position"),
    "drawer-open": ("Pull the drawer open by its handle.", "obj is the drawer handle; the goal is the handle's open position"),
    "faucet-open": ("Turn the faucet handle to open the tap.", "obj is the end of the faucet handle; the goal is its open position"),
    "faucet-close": ("Turn the faucet handle to close the tap.", "obj is the end of the faucet handle; the goal is its closed position"),
    "hammer": ("Pick up the hammer and drive the nail into the wall.", "obj is the hammer's handle, obj2 the nail head; the goal is the nail driven in"),
    "handle-press-side": ("Press the handle down, reaching it from the side.", "obj is the handle's end; the goal is its pressed position"),
    "handle-press": ("Press the handle down.", "obj is the handle's end; the goal is its pressed position"),
    "handle-pull-side": ("Pull the handle up, reaching it from the side.", "obj is the handle's end; the goal is its raised position"),
    "handle-pull": ("Pull the handle up.", "obj is the handle's end; the goal is its raised position"),
    "lever-pull": ("Pull the lever up.", "obj is the lever's end; the goal is its raised position"),
    "pick-place-wall": ("Pick up the puck and place it at the goal on the other side of the wall.", "obj is the puck; the goal is in the air behind the wall"),
    "pick-out-of-hole": ("Pick the peg out of the hole and lift it to the goal.", "obj is the peg; the goal is above the hole"),
    "pick-place": ("Pick up the puck and move it to the goal position in the air.", "obj is the puck; the goal may be above the table"),
    "plate-slide": ("Slide the plate across the table into the goal under the cabinet.", "obj is the plate; the goal is inside the cabinet"),
    "plate-slide-side": ("Slide the plate sideways into the cabinet.", "obj is the plate; the goal is inside the cabinet"),
    "plate-slide-back": ("Slide the plate back out of the cabinet to the goal.", "obj is the plate; the goal is in front of the cabinet"),
    "plate-slide-back-side": ("Slide the plate sideways out of the cabinet to the goal.", "obj is the plate; the goal is beside the cabinet"),
    "peg-insert-side": ("Pick up the peg and insert it sideways into the hole in the box.", "obj is the peg's head; the goal is inside the hole"),
    "peg-unplug-side": ("Pull the peg sideways out of the hole in the box.", "obj is the peg; the goal is where the unplugged peg should be"),
    "soccer": ("Push the soccer ball into the goal net.", "obj is the ball; the goal is inside the net"),
    "stick-push": ("Grasp the stick and use it to push the thermos to the goal.", "obj is the stick, obj2 the thermos; the goal is the thermos's target"),
    "stick-pull": ("Grasp the stick and use it to pull the thermos to the goal.", "obj is the stick, obj2 the thermos' handle; the goal is the thermos's target"),
    "push": ("Push the puck across the table to the goal.", "obj is the puck; the goal is on the table"),
    "push-wall": ("Push the puck around the wall to the goal.", "obj is the puck; the goal is behind the wall"),
    "push-back": ("Pull the puck back towards the robot to the goal.", "obj is the puck; the goal is nearer the robot"),
    "reach": ("Move the gripper to the goal position.", "obj is a puck on the table that this task ignores; only the gripper and the goal matter"),
    "reach-wall": ("Move the gripper to the goal position on the other side of the wall.", "obj is a puck that this task ignores; only the gripper and the goal matter"),
    "shelf-place": ("Pick up the block and place it on the shelf.", "obj is the block; the goal is on the shelf"),
    "sweep-into": ("Sweep the puck into the hole in the table.", "obj is the puck; the goal is the hole"),
    "sweep": ("Sweep the puck off the edge of the table.", "obj is the puck; the goal is on the table near its +x edge, so the puck need not fall off (the table's edges are stated below)"),
    "window-open": ("Slide the window open.", "obj is the window handle; the goal is its open position"),
    "window-close": ("Slide the window closed.", "obj is the window handle; the goal is its closed position"),
}

EXPERT_DOC = "MetaWorld's own dense reward for this task (v2 reward function, 0 to 10 per step)"


def make_metaworld_env(
    name: str,
    render_mode: str | None = None,
    seed: int | None = None,
    camera_name: str = "corner2",
    size: int = 480,
    max_episode_steps: int = EPISODE_STEPS,
) -> gym.Env:
    """MetaWorld's goal-observable env, placements re-drawn at every reset, with our time limit
    (`max_episode_steps`; MetaWorld's own cap, `max_path_length`, is raised to match a longer one)."""
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE

    # MetaWorld types these classes as SawyerXYZEnv; the goal-observable ones replace its __init__ with (seed, render_mode)
    env_class: Callable[..., SawyerXYZEnv] = ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE[f"{name}-v3-goal-observable"]
    env = env_class(seed=seed, render_mode=render_mode)
    # MetaWorld makes the goal observable after building the env, whose space still bounds the goal to
    # [0, 0, 0]: the observations then fall outside their own space (Gymnasium's env checker refuses it)
    env.observation_space = env.sawyer_observation_space
    env._freeze_rand_vec = False
    env.seeded_rand_vec = True  # draw placements from env.np_random, not numpy's global generator
    env.seed(_fresh_seed() if seed is None else seed)
    if render_mode is not None:
        env.mujoco_renderer.camera_id = env.model.camera(camera_name).id
        env.mujoco_renderer.width = env.mujoco_renderer.height = size
    # MetaWorld refuses a step past its own cap (500): a longer episode needs a higher cap
    env.max_path_length = max(int(env.max_path_length), int(max_episode_steps))
    return gym.wrappers.TimeLimit(MetaWorldSeeding(env), max_episode_steps=max_episode_steps)


def _fresh_seed() -> int:
    """A random 31-bit seed, from entropy the operating system supplies."""
    entropy = np.random.SeedSequence().entropy
    assert isinstance(entropy, int)  # drawn from the OS when none is given
    return int(entropy % 2**31)


class MetaWorldSeeding(gym.Wrapper):
    """Honour `reset(seed=...)` (MetaWorld's own reset ignores the seed argument), and return the state reset made.

    Why the second part: MetaWorld's reset moves the object's body (`model.body_pos`) after its last physics
    step and reads the observation without recomputing the kinematics, so in dial-turn, drawer-open, faucet-open,
    lever-pull and window-open/-close the first observation (and a view read then) shows the object where the
    previous placement left it, 7-22 cm from where it is (the first step then "moves" it there). Recomputing the
    kinematics (`mj_forward`: positions from qpos; no time passes, nothing moves) makes the first observation true.
    """

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        env = cast("SawyerXYZEnv", self.env.unwrapped)
        if seed is not None:
            env.seed(seed)
        _, info = self.env.reset(options=options)
        return settled_observation(env), info


def settled_observation(env: Any) -> np.ndarray:
    """The observation of the state MetaWorld's reset left, with its kinematics computed (see MetaWorldSeeding).

    Laid out as MetaWorld's reset lays it out: the current frame twice (no previous frame yet), then the goal.
    """
    import mujoco

    mujoco.mj_forward(env.model, env.data)
    env._prev_obs = env._get_curr_obs_combined_no_goal()
    return np.asarray(env._get_obs(), dtype=np.float64)


def _object(position: np.ndarray, quaternion: np.ndarray, init_position: np.ndarray) -> SawyerObject:
    return SawyerObject(position=frozen(position), quaternion=frozen(quaternion), init_position=init_position)


@dataclass(frozen=True)
class _SawyerIds:
    """MuJoCo ids of the bodies and sites the view reads, looked up once per model (name lookups cost ~1 µs each)."""

    hand: int
    right_claw: int
    left_claw: int
    left_pad: int
    right_pad: int
    right_end_effector: int
    left_end_effector: int
    touch_geoms: tuple[int, int, int] | None
    """(left pad, right pad, main object) geom ids where the view reports `pads_touch_obj`, else None."""


_SAWYER_IDS: "weakref.WeakKeyDictionary[Any, _SawyerIds]" = weakref.WeakKeyDictionary()


def _sawyer_ids(env: Any) -> _SawyerIds:
    model = env.model
    ids = _SAWYER_IDS.get(model)
    if ids is None:
        body, site, geom = model.body, model.site, model.geom
        touch = None
        if _tracks_pad_contact(env):
            touch = (geom("leftpad_geom").id, geom("rightpad_geom").id, int(env._get_id_main_object()))
        ids = _SawyerIds(
            hand=body("hand").id,
            right_claw=body("rightclaw").id,
            left_claw=body("leftclaw").id,
            left_pad=body("leftpad").id,
            right_pad=body("rightpad").id,
            right_end_effector=site("rightEndEffector").id,
            left_end_effector=site("leftEndEffector").id,
            touch_geoms=touch,
        )
        _SAWYER_IDS[model] = ids
    return ids


def _tracks_pad_contact(env: Any) -> bool:
    """Only stick-push's success test asks whether the pads touch the object: other tasks skip the contact scan."""
    from metaworld.envs.sawyer_stick_push_v3 import SawyerStickPushEnvV3

    return isinstance(env, SawyerStickPushEnvV3)


def _pads_touch(data: Any, geoms: tuple[int, int, int]) -> bool:
    """MetaWorld's `touching_object`: each pad's contacts with the object have a positive summed force (summed
    in contact order, as it does), in ~5 µs instead of its ~300 µs loop over contact structs."""
    left, right, obj = geoms
    contact, force = data.contact, data.efc_force
    left_force = right_force = 0.0
    for a, b, address in zip(contact.geom1.tolist(), contact.geom2.tolist(), contact.efc_address.tolist()):
        if a == obj or b == obj:
            if a == left or b == left:
                left_force += force[address]
            if a == right or b == right:
                right_force += force[address]
    return bool(0 < left_force and 0 < right_force)


def _object_quaternions(env: Any, positions: np.ndarray, hand: np.ndarray, openness: float) -> np.ndarray:
    """`env._get_quat_objects()`, taken from MetaWorld's own copy of it when that copy is current.

    Why: most tasks compute the quaternion with scipy's `Rotation.from_matrix` (~110 µs, more than
    the rest of the view), and MetaWorld has already done so this step: `_get_obs` keeps
    [hand (3), gripper (1), (position (3), quaternion (4)) per object] in `_prev_obs`, from the same
    accessors, after the step's `mj_forward`. The copy is used only when its hand position, gripper
    value and every object position equal the simulator's exactly; a state changed since (e.g. by
    `set_state`) fails that check and the accessor is called. Only a change that rotates objects
    without moving anything could slip through, which no step or reset does.
    """
    cached = getattr(env, "_prev_obs", None)
    count = positions.size // 3
    if cached is None or cached.size < 4 + 7 * count:
        return np.asarray(env._get_quat_objects(), dtype=np.float64)
    head = cached[: 4 + 7 * count].tolist()  # Python floats: list comparisons cost far less than numpy's on 3-vectors
    if head[:3] == hand.tolist() and head[3] == openness:
        slots = [head[4 + 7 * i : 11 + 7 * i] for i in range(count)]
        if [v for slot in slots for v in slot[:3]] == positions.tolist():
            return np.array([v for slot in slots for v in slot[3:]])
    return np.asarray(env._get_quat_objects(), dtype=np.float64)


def read_sawyer_view(env: Any, previous: SawyerView | None) -> SawyerView:
    """Read the scene from MuJoCo data through MetaWorld's own accessors (never the flat obs).

    Ids are cached per model; quaternions come from MetaWorld's own per-step copy of its accessor
    when that copy matches the simulator (see `_object_quaternions`).
    """
    data, ids = env.data, _sawyer_ids(env)
    xpos, site_xpos = data.xpos, data.site_xpos
    positions = np.asarray(env._get_pos_objects(), dtype=np.float64)
    hand = xpos[ids.hand]
    apart = xpos[ids.right_claw] - xpos[ids.left_claw]
    fingers = np.sqrt(apart.dot(apart))  # exactly np.linalg.norm's computation for a 1-D vector, without its checks
    openness = float(min(max(fingers / 0.1, 0.0), 1.0))  # = np.clip(fingers / 0.1, 0, 1), without its ~3 µs
    if previous is None:
        quaternions = np.asarray(env._get_quat_objects(), dtype=np.float64)
        init_ee, init_hand = frozen(env.init_tcp), frozen(env.hand_init_pos)
        init_left, init_right = frozen(env.init_left_pad), frozen(env.init_right_pad)
        # each object's start is its own tracked point in the first state (MetaWorld's obj_init_pos is, in many
        # tasks, another point: the dial's centre 5 cm from the tracked rim point, the thermos in the stick tasks)
        init_obj, init_obj2 = frozen(positions[:3]), frozen(positions[3:6]) if positions.size > 3 else None
    else:
        quaternions = _object_quaternions(env, positions, hand, openness)
        r = previous.robot
        init_ee, init_hand = r.init_ee_position, r.init_hand_position
        init_left, init_right = r.init_left_pad_position, r.init_right_pad_position
        init_obj = previous.obj.init_position
        init_obj2 = previous.obj2.init_position if previous.obj2 is not None else None
    # MetaWorld's tcp_center, (right + left end-effector sites) / 2, with cached ids and Python floats (same IEEE results).
    right, left = site_xpos[ids.right_end_effector].tolist(), site_xpos[ids.left_end_effector].tolist()
    tcp = np.array([(r + l_) / 2.0 for r, l_ in zip(right, left)])
    tcp.setflags(write=False)  # a fresh array: read-only without a second copy
    robot = SawyerRobot(
        ee_position=tcp,
        hand_position=frozen(hand),
        gripper_openness=openness,
        left_pad_position=frozen(xpos[ids.left_pad]),
        right_pad_position=frozen(xpos[ids.right_pad]),
        init_ee_position=init_ee,
        init_hand_position=init_hand,
        init_left_pad_position=init_left,
        init_right_pad_position=init_right,
        pads_touch_obj=None if ids.touch_geoms is None else _pads_touch(data, ids.touch_geoms),
    )
    obj2 = None
    if positions.size > 3 and init_obj2 is not None:  # init_obj2 is set exactly when there is a second object
        obj2 = _object(positions[3:6], quaternions[4:8], init_obj2)
    return SawyerView(
        dt=float(env.dt),
        episode_step=int(env.curr_path_length),
        robot=robot,
        obj=_object(positions[:3], quaternions[:4], init_obj),
        obj2=obj2,
        goal_position=frozen(env._target_pos),
    )


def metaworld_success(view: StateView, info: dict[str, Any]) -> bool:
    return bool(info.get("success", 0.0))


def _scripted_policy(name: str) -> Callable[[np.ndarray], np.ndarray]:
    from metaworld.policies import ENV_POLICY_MAP

    policy_class: Callable[[], Policy] = ENV_POLICY_MAP[f"{name}-v3"]  # MetaWorld types these as the abstract Policy
    policy = policy_class()
    return policy.get_action


def metaworld_tasks() -> list[Task]:
    tasks = []
    for name, (description, notes) in METAWORLD_TASKS.items():
        success_rule = METAWORLD_RULES[name]  # every task has one (tests/sim_envs/test_metaworld_success_rules.py)
        tasks.append(
            Task(
                id=f"metaworld/{name}-v3",
                family="metaworld",
                description=description,
                env_factory=partial(make_metaworld_env, name),
                view_class=SawyerView,
                read_view=read_sawyer_view,
                is_success=metaworld_success,
                success_doc=success_rule.describe("any"),
                success_mode="any",
                success_rule=success_rule,
                keypoints=KeypointSetup("corner", upside_down=True, anchors=REACH_ANCHORS, oracle=REACH_ORACLE) if name.startswith("reach") else KeypointSetup("corner", upside_down=True),
                scale_points=REACH_SCALE_POINTS if name.startswith("reach") else ARM_SCALE_POINTS,
                max_episode_steps=EPISODE_STEPS,
                default_steps=20_000,
                expert_reward_doc=EXPERT_DOC,
                scripted_policy_factory=partial(_scripted_policy, name),
                action_doc=ACTION_DOC,
                view_notes=notes + ".",
                scene_features=METAWORLD_FEATURES[name],
            )
        )
    return tasks
