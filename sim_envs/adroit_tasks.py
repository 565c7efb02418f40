"""The Adroit hand tasks of DAPG (door, hammer, pen, relocate) from Gymnasium-Robotics 1.4.2.

The Adroit platform is a 24-joint Shadow hand on a small arm base (Rajeswaran, Kumar et al. 2018, "Learning
Complex Dexterous Manipulation with Deep Reinforcement Learning and Demonstrations"). We wrap
`AdroitHand{Door,Hammer,Pen,Relocate}-v1`, the only ids gymnasium-robotics 1.4.2 registers (v2 ids appear in
later releases). Their v1 dense rewards are the ones changed in 1.2.1 without a version bump (the library's
start-up notice; Gymnasium-Robotics PR #220): in door, hammer and relocate the palm-to-object term is
`+0.1 * distance`, which pays the hand for moving *away* from the object (D4RL's original, and 1.2.0, had
`-0.1 * distance`; the fix ships as AdroitHand*-v2 in gymnasium-robotics >= 1.4.3). We pin
gymnasium-robotics==1.4.2, so these rewards are reproducible for us: the expert reward is exactly the env's
dense reward, that sign included, and the few-shot examples rewrite it as it is.

Success = the env's own `info["success"]` (door: hinge at least 1.35 rad; hammer: nail head within 1 cm of its
goal; pen: within 7.5 cm of the goal position and axes aligned to a dot product above 0.95; relocate: ball
within 10 cm of the target), each also written as a rule over the view (tests check it against the flag).
An episode succeeds if the flag holds at its last step ("final"). DAPG's `evaluate_success` counts an episode
that held the flag for more than 25 steps (20 for pen); both ask that the goal state last rather than be
brushed past, and the last step is the simpler rule to state to a reward designer.

One view class serves the family, as in MetaWorld: `obj` is each task's main object (door handle, hammer,
pen, ball), `goal_position` its goal, and each task's own part (`door`, `hammer`, `pen`) is None in the others.
"""

import weakref
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from sim_envs.gymnasium_robotics_import import make_gymnasium_robotics_env
from sim_envs.success_progress import mean_of, progress_of, reaching, within
from sim_envs.success_rule import distance, rule
from sim_envs.task import Task
from sim_envs.view_base import StateView, attr, frozen

HAND_JOINTS = (
    "WRJ1", "WRJ0",
    "FFJ3", "FFJ2", "FFJ1", "FFJ0",
    "MFJ3", "MFJ2", "MFJ1", "MFJ0",
    "RFJ3", "RFJ2", "RFJ1", "RFJ0",
    "LFJ4", "LFJ3", "LFJ2", "LFJ1", "LFJ0",
    "THJ4", "THJ3", "THJ2", "THJ1", "THJ0",
)
"""The 24 joints of a Shadow hand (Adroit's and the Shadow Dexterous Hand's, which prefixes them with `robot0:`)."""
HAND_JOINTS_DOC = (
    "in the order WRJ1, WRJ0 (wrist: side to side, up and down), FFJ3, FFJ2, FFJ1, FFJ0 (index finger: spread, "
    "then knuckle, middle and tip joints), MFJ3-MFJ0 (middle finger), RFJ3-RFJ0 (ring finger), LFJ4-LFJ0 (little "
    "finger; LFJ4 cups the palm), THJ4-THJ0 (thumb: base rotation, base flexion, spread, middle, tip)"
)
FINGERTIP_SITES = {"thumb": "S_thtip", "index": "S_fftip", "middle": "S_mftip", "ring": "S_rftip", "little": "S_lftip"}
"""MJCF sites at the fingertips (the Shadow Dexterous Hand's are the same names with `robot0:`)."""


@dataclass(slots=True)
class Fingertips:
    """The five fingertips' positions (world frame, metres)."""

    thumb: np.ndarray = attr("(3,) tip of the thumb")
    index: np.ndarray = attr("(3,) tip of the index (first) finger")
    middle: np.ndarray = attr("(3,) tip of the middle finger")
    ring: np.ndarray = attr("(3,) tip of the ring finger")
    little: np.ndarray = attr("(3,) tip of the little finger")


@dataclass(slots=True)
class AdroitHand:
    """The Adroit hand: a 24-joint Shadow hand on an arm base whose joints differ per task (see the task notes)."""

    ee_position: np.ndarray = attr("(3,) centre of the palm (MJCF site S_grasp): where the env's rewards measure the hand from")
    fingertips: Fingertips = attr("the five fingertips")
    joint_angles: np.ndarray = attr(f"(24,) rad, the hand's joints {HAND_JOINTS_DOC}")
    joint_velocities: np.ndarray = attr("(24,) rad/s, in the order of joint_angles")
    arm_joint_positions: np.ndarray = attr(
        "(n,) the arm base's joints (slides in m, hinges in rad) in the order the task notes list; empty when the hand is fixed")
    arm_joint_velocities: np.ndarray = attr("(n,) m/s or rad/s, in the order of arm_joint_positions")
    init_ee_position: np.ndarray = attr("(3,) ee_position at the start of the episode")


@dataclass(slots=True)
class AdroitObject:
    """The task's main object (the task notes say which)."""

    position: np.ndarray = attr("(3,) the object's tracked point (the task notes say which), where the env's reward measures it")
    quaternion: np.ndarray = attr("(4,) orientation quaternion (w, x, y, z) of the object's body, world frame")
    velocity: np.ndarray = attr("(3,) m/s, linear velocity of `position`, world frame")
    angular_velocity: np.ndarray = attr("(3,) rad/s, angular velocity of the object's body, world frame")
    init_position: np.ndarray = attr("(3,) position at the start of the episode")


@dataclass(slots=True)
class AdroitDoor:
    """The door (adroit/door only; None in the other tasks)."""

    hinge_angle: float = attr(
        "rad, how far the door has swung open: 0 closed, 1.57 fully open (its limit, where the env's reward pulls it)")
    hinge_velocity: float = attr("rad/s, opening speed of the door")
    latch_angle: float = attr(
        "rad, how far the handle (the latch) is turned: 0 at rest, up to 1.8; it holds the door shut until turned")
    latch_velocity: float = attr("rad/s, turning speed of the handle")
    frame_position: np.ndarray = attr("(3,) the door frame's body, placed at random at each reset")


@dataclass(slots=True)
class AdroitHammer:
    """The hammer's head and the nail (adroit/hammer only; None in the other tasks)."""

    head_position: np.ndarray = attr("(3,) the hammer's striking face (MJCF site `tool`)")
    nail_position: np.ndarray = attr("(3,) centre of the nail's head (MJCF site S_target)")
    nail_depth: float = attr("m the nail has been driven into the board: 0 at the start, up to 0.09")
    nail_impact: float = attr("N, normal force on the nail's head this step (a touch sensor; 0 when nothing presses on it)")


@dataclass(slots=True)
class AdroitPen:
    """The pen's axis and the goal orientation (adroit/pen only; None in the other tasks)."""

    orientation: np.ndarray = attr("(3,) unit vector along the pen, from its bottom end to its top end")
    goal_orientation: np.ndarray = attr("(3,) unit vector the pen's axis must point along (the goal pen, drawn beside the hand)")
    goal_quaternion: np.ndarray = attr("(4,) the goal orientation as a quaternion (w, x, y, z), world frame")


@dataclass(slots=True)
class AdroitView(StateView):
    """An Adroit hand on its arm base, the task's object and its goal."""

    robot: AdroitHand = attr("the hand and its arm base")
    obj: AdroitObject = attr("the task's main object (the task notes say which)")
    goal_position: np.ndarray = attr("(3,) where `obj.position` must go (the task notes say what it is)")
    qvel_norm: float = attr(
        "2-norm of every joint velocity in the scene (arm, hand and object joints; rad/s and m/s mixed), MuJoCo's "
        "|qvel|: what the env's velocity penalties use")
    door: AdroitDoor | None = attr("the door's state in adroit/door; None in the other tasks")
    hammer: AdroitHammer | None = attr("the hammer's head and the nail in adroit/hammer; None in the other tasks")
    pen: AdroitPen | None = attr("the pen's and the goal's orientations in adroit/pen; None in the other tasks")


DOOR_OPEN_ANGLE = 1.57
"""The door hinge's upper limit, the angle the env's dense reward pulls towards."""


@dataclass(frozen=True)
class AdroitSpec:
    """What differs between the four tasks."""

    gym_id: str
    description: str
    notes: str
    object_body: str
    """The body whose pose and velocities `obj` reports."""
    object_site: str | None
    """A site that `obj.position` tracks instead of the body's origin (the door handle), or None."""
    goal_site: str
    """The site `goal_position` reads (the door computes its own: see `_door_goal`)."""


ADROIT_TASKS: dict[str, AdroitSpec] = {
    "door": AdroitSpec(
        "AdroitHandDoor-v1",
        "Turn the door handle to undo the latch, then swing the door open.",
        "obj is the door handle (obj.position the MJCF site S_handle, on the latch; quaternion and angular velocity are "
        "the latch's); goal_position is where the handle would be with the door fully open (hinge at 1.57 rad) and the "
        "latch as it is now; `door` holds the hinge and latch angles (hammer and pen are None). The door is placed at random "
        "at each reset. Arm joints: ARTz (slide towards the door, m), ARRx, ARRy, ARRz (arm rotations, rad).",
        "latch", "S_handle", "S_handle"),
    "hammer": AdroitSpec(
        "AdroitHandHammer-v1",
        "Pick up the hammer and drive the nail into the board.",
        "obj is the hammer (obj.position the centre of its handle, MJCF body `Object`); goal_position is where the nail's "
        "head must go, flush with the board (MJCF site nail_goal); `hammer` holds the hammer's head and the nail (door and pen "
        "are None). The board's height is drawn at random at each reset. Arm joints: ARRx, ARRy (arm rotations, rad).",
        "Object", None, "nail_goal"),
    "pen": AdroitSpec(
        "AdroitHandPen-v1",
        "Rotate the pen in the hand to match the goal orientation, keeping it in place.",
        "obj is the pen (obj.position its centre); goal_position is where the pen starts (and must stay: MJCF site eps_ball); "
        "`pen` holds the pen's axis and the goal axis, drawn at random at each reset (door and hammer are None). A pen below "
        "0.075 m has been dropped (the env's reward penalises it). The hand is fixed: no arm joints (arm_joint_positions is empty).",
        "Object", None, "eps_ball"),
    "relocate": AdroitSpec(
        "AdroitHandRelocate-v1",
        "Pick up the ball from the table and move it to the target in the air.",
        "obj is the ball (obj.position its centre); goal_position is the target, drawn at random at each reset, 15-35 cm "
        "above the table (door, hammer and pen are None). The ball starts on the table at a random place. Arm joints: ARTx, "
        "ARTy, ARTz (slides, m), ARRx, ARRy, ARRz (rotations, rad).",
        "Object", None, "target"),
}

ARM_DOC = {
    "door": "action[0] slides the arm towards the door (ARTz), action[1:4] rotate the arm (ARRx, ARRy, ARRz)",
    "hammer": "action[0:2] rotate the arm (ARRx, ARRy)",
    "pen": "",
    "relocate": "action[0:3] slide the arm (ARTx, ARTy, ARTz), action[3:6] rotate it (ARRx, ARRy, ARRz)",
}


def action_doc(name: str, n_arm: int) -> str:
    arm = ARM_DOC[name]
    hand = (f"action[{n_arm}:{n_arm + 24}] the 24 hand joints in the order of `robot.joint_angles`" if n_arm
            else "action[0:24] the 24 hand joints in the order of `robot.joint_angles` (the hand has no arm here)")
    return (
        f"np.ndarray ({n_arm + 24},) in [-1, 1]: absolute position targets, one per actuated joint, each mapped linearly "
        f"from [-1, 1] onto that joint's control range (a position servo; one action lasts 0.01 s): "
        + (f"{arm}; " if arm else "") + hand
    )


EXPERT_DOC = {
    "door": "Gymnasium-Robotics' v1 dense reward (1.4.2): +0.1 x palm-to-handle distance (the sign as shipped), "
            "-0.1 x (hinge - 1.57)^2, -1e-5 x |qvel|^2, bonuses 2 / 8 / 10 past hinge 0.2 / 1.0 / 1.35 rad",
    "hammer": "Gymnasium-Robotics' v1 dense reward (1.4.2): +0.1 x palm-to-hammer distance (the sign as shipped), minus the "
              "head-to-nail distance, -10 x nail-to-goal distance, -0.01 x |qvel|, +2 once hammer and head are lifted above "
              "4 cm, +25 / +75 with the nail within 2 / 1 cm of its goal",
    "pen": "Gymnasium-Robotics' v1 dense reward (1.4.2): minus the pen-to-goal distance, plus the dot product of the pen and "
           "goal axes, +10 / +50 within 7.5 cm and aligned above 0.9 / 0.95, -5 once the pen drops below 7.5 cm",
    "relocate": "Gymnasium-Robotics' v1 dense reward (1.4.2): +0.1 x palm-to-ball distance (the sign as shipped); with the "
                "ball above 4 cm, +1 - 0.5 x palm-to-target - 0.5 x ball-to-target; +10 / +20 with the ball within 10 / 5 cm",
}

BUDGET_NOTE = (
    "Dexterous hand tasks need millions of env steps: DAPG (Rajeswaran et al. 2018) learned them from scratch with policy "
    "gradients only after millions of samples even on this shaped reward, which is why it added demonstrations. On a busy "
    "2-core machine SBX SAC ([256, 256], one gradient update per step) trained adroit/door at about 50 steps/s and "
    "shadow/block at about 30 (measured, compilation included), so the default 1,000,000 steps is 5-10 hours per "
    "candidate: train on a GPU or a bigger machine, and judge short runs by their reward components, not their success rate."
)

SCALE_POINTS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "door": (("palm to handle", "robot.ee_position", "obj.position"),
             ("handle to its open position", "obj.position", "goal_position")),
    "hammer": (("palm to hammer", "robot.ee_position", "obj.position"),
               ("hammer head to nail", "hammer.head_position", "hammer.nail_position"),
               ("nail to its goal", "hammer.nail_position", "goal_position")),
    "pen": (("palm to pen", "robot.ee_position", "obj.position"),
            ("pen to its goal position", "obj.position", "goal_position")),
    "relocate": (("palm to ball", "robot.ee_position", "obj.position"),
                 ("ball to target", "obj.position", "goal_position")),
}



@dataclass(frozen=True)
class _AdroitIds:
    """Addresses the view reads, looked up once per model."""

    task: str
    grasp_site: int
    tip_sites: tuple[int, int, int, int, int]
    """thumb, index, middle, ring, little."""
    hand_qpos: np.ndarray
    hand_dof: np.ndarray
    arm_qpos: np.ndarray
    arm_dof: np.ndarray
    object_body: int
    object_site: int | None
    goal_site: int
    # door
    hinge_joint: int = -1
    hinge_qpos: int = -1
    hinge_dof: int = -1
    latch_qpos: int = -1
    latch_dof: int = -1
    frame_body: int = -1
    # hammer
    tool_site: int = -1
    nail_site: int = -1
    nail_qpos: int = -1
    nail_sensor: int = -1
    # pen
    pen_top: int = -1
    pen_bottom: int = -1
    target_top: int = -1
    target_bottom: int = -1
    target_body: int = -1


_ADROIT_IDS: "weakref.WeakKeyDictionary[Any, _AdroitIds]" = weakref.WeakKeyDictionary()


def _adroit_ids(model: Any, task: str) -> _AdroitIds:
    ids = _ADROIT_IDS.get(model)
    if ids is None:
        spec = ADROIT_TASKS[task]
        joint_names = [model.joint(i).name for i in range(model.njnt)]
        arm = [i for i, name in enumerate(joint_names) if name.startswith("AR")]
        hand = [model.joint(name).id for name in HAND_JOINTS]
        site, body = model.site, model.body

        def qpos(name: str) -> int:
            return int(model.jnt_qposadr[model.joint(name).id])

        def dof(name: str) -> int:
            return int(model.jnt_dofadr[model.joint(name).id])

        extra: dict[str, int] = {}
        if task == "door":
            extra = dict(hinge_joint=model.joint("door_hinge").id, hinge_qpos=qpos("door_hinge"), hinge_dof=dof("door_hinge"),
                         latch_qpos=qpos("latch"), latch_dof=dof("latch"), frame_body=body("frame").id)
        elif task == "hammer":
            sensor = model.sensor("S_nail").id
            extra = dict(tool_site=site("tool").id, nail_site=site("S_target").id, nail_qpos=qpos("nail_dir"),
                         nail_sensor=int(model.sensor_adr[sensor]))
        elif task == "pen":
            extra = dict(pen_top=site("object_top").id, pen_bottom=site("object_bottom").id, target_top=site("target_top").id,
                         target_bottom=site("target_bottom").id, target_body=body("target").id)
        thumb, index, middle, ring, little = (site(FINGERTIP_SITES[finger]).id for finger in ("thumb", "index", "middle", "ring", "little"))
        ids = _AdroitIds(
            task=task,
            grasp_site=site("S_grasp").id,
            tip_sites=(thumb, index, middle, ring, little),
            hand_qpos=np.array([model.jnt_qposadr[j] for j in hand]),
            hand_dof=np.array([model.jnt_dofadr[j] for j in hand]),
            arm_qpos=np.array([model.jnt_qposadr[j] for j in arm], dtype=int),
            arm_dof=np.array([model.jnt_dofadr[j] for j in arm], dtype=int),
            object_body=body(spec.object_body).id,
            object_site=None if spec.object_site is None else site(spec.object_site).id,
            goal_site=site(spec.goal_site).id,
            **extra,
        )
        _ADROIT_IDS[model] = ids
    return ids


def _velocity(model: Any, data: Any, kind: Any, index: int) -> np.ndarray:
    """(angular (3), linear (3)) velocity of a body or site, world-oriented, at its own origin (MuJoCo's mj_objectVelocity)."""
    import mujoco

    out = np.zeros(6)
    mujoco.mj_objectVelocity(model, data, kind, index, out, 0)
    return out


def _rotate(point: np.ndarray, anchor: np.ndarray, axis: np.ndarray, angle: float) -> np.ndarray:
    """`point` turned by `angle` about the unit `axis` through `anchor` (Rodrigues' formula)."""
    v = point - anchor
    c, s = np.cos(angle), np.sin(angle)
    return anchor + v * c + np.cross(axis, v) * s + axis * float(np.dot(axis, v)) * (1.0 - c)


def _door_goal(data: Any, ids: _AdroitIds, handle: np.ndarray, hinge: float) -> np.ndarray:
    """Where the handle would be with the door at DOOR_OPEN_ANGLE (the latch as it is): the handle turned about the hinge."""
    return _rotate(handle, data.xanchor[ids.hinge_joint], data.xaxis[ids.hinge_joint], DOOR_OPEN_ANGLE - hinge)


def read_adroit_view(env: Any, previous: AdroitView | None, task: str) -> AdroitView:
    """The view of any Adroit task, from MuJoCo data the way the env's reward reads it (site_xpos after the step)."""
    import mujoco

    model, data = env.model, env.data
    ids = _adroit_ids(model, task)
    site_xpos, qpos, qvel = data.site_xpos, data.qpos, data.qvel
    palm = frozen(site_xpos[ids.grasp_site])
    thumb, index, middle, ring, little = (frozen(site_xpos[i]) for i in ids.tip_sites)
    robot = AdroitHand(
        ee_position=palm,
        fingertips=Fingertips(thumb=thumb, index=index, middle=middle, ring=ring, little=little),
        joint_angles=frozen(qpos[ids.hand_qpos]),
        joint_velocities=frozen(qvel[ids.hand_dof]),
        arm_joint_positions=frozen(qpos[ids.arm_qpos]),
        arm_joint_velocities=frozen(qvel[ids.arm_dof]),
        init_ee_position=palm if previous is None else previous.robot.init_ee_position,
    )
    body_velocity = _velocity(model, data, mujoco.mjtObj.mjOBJ_BODY, ids.object_body)
    if ids.object_site is None:
        position, linear = data.xpos[ids.object_body], body_velocity[3:]
    else:
        position = site_xpos[ids.object_site]
        linear = _velocity(model, data, mujoco.mjtObj.mjOBJ_SITE, ids.object_site)[3:]
    obj = AdroitObject(
        position=frozen(position),
        quaternion=frozen(data.xquat[ids.object_body]),
        velocity=frozen(linear),
        angular_velocity=frozen(body_velocity[:3]),
        init_position=frozen(position) if previous is None else previous.obj.init_position,
    )
    door = hammer = pen = None
    goal = site_xpos[ids.goal_site]
    if task == "door":
        hinge = float(qpos[ids.hinge_qpos])
        goal = _door_goal(data, ids, np.asarray(position), hinge)
        door = AdroitDoor(
            hinge_angle=hinge,
            hinge_velocity=float(qvel[ids.hinge_dof]),
            latch_angle=float(qpos[ids.latch_qpos]),
            latch_velocity=float(qvel[ids.latch_dof]),
            frame_position=frozen(data.xpos[ids.frame_body]),
        )
    elif task == "hammer":
        hammer = AdroitHammer(
            head_position=frozen(site_xpos[ids.tool_site]),
            nail_position=frozen(site_xpos[ids.nail_site]),
            nail_depth=float(qpos[ids.nail_qpos]),
            nail_impact=float(data.sensordata[ids.nail_sensor]),
        )
    elif task == "pen":
        # the env's own computation: (top - bottom) / the lengths it measured at reset
        pen = AdroitPen(
            orientation=frozen((site_xpos[ids.pen_top] - site_xpos[ids.pen_bottom]) / env.pen_length),
            goal_orientation=frozen((site_xpos[ids.target_top] - site_xpos[ids.target_bottom]) / env.tar_length),
            goal_quaternion=frozen(data.xquat[ids.target_body]),
        )
    return AdroitView(
        dt=float(env.dt),
        episode_step=0 if previous is None else previous.episode_step + 1,
        robot=robot,
        obj=obj,
        goal_position=frozen(goal),
        qvel_norm=float(np.linalg.norm(qvel)),
        door=door,
        hammer=hammer,
        pen=pen,
    )


def adroit_success(view: StateView, info: dict[str, Any]) -> bool:
    return bool(info.get("success", False))


# --- success rules: the env's own tests, over the view ---

DOOR_SUCCESS_ANGLE = 1.35
HAMMER_SUCCESS_DISTANCE = 0.01
PEN_SUCCESS_DISTANCE = 0.075
PEN_SUCCESS_ALIGNMENT = 0.95
RELOCATE_SUCCESS_DISTANCE = 0.1


def door_open(view: Any, ANGLE: float) -> bool:
    """`door.hinge_angle` at least {ANGLE} rad (the door swung open)"""
    return bool(view.door.hinge_angle >= ANGLE)


def nail_driven(view: Any, DISTANCE: float) -> bool:
    """`hammer.nail_position` less than {DISTANCE} m from `goal_position` (the nail driven into the board)"""
    return distance(view.hammer.nail_position, view.goal_position) < DISTANCE


def pen_oriented(view: Any, DISTANCE: float, ALIGNMENT: float) -> bool:
    """`obj.position` less than {DISTANCE} m from `goal_position` and `np.dot(pen.orientation, pen.goal_orientation)` above {ALIGNMENT}"""
    return distance(view.obj.position, view.goal_position) < DISTANCE and bool(np.dot(view.pen.orientation, view.pen.goal_orientation) > ALIGNMENT)


def ball_at_target(view: Any, DISTANCE: float) -> bool:
    """`obj.position` less than {DISTANCE} m from `goal_position`"""
    return distance(view.obj.position, view.goal_position) < DISTANCE


@progress_of(door_open)
def door_open_progress(view: Any, ANGLE: float) -> float:
    return reaching(view.door.hinge_angle, ANGLE)


@progress_of(nail_driven)
def nail_driven_progress(view: Any, DISTANCE: float) -> float:
    return within(distance(view.hammer.nail_position, view.goal_position), DISTANCE)


@progress_of(pen_oriented)
def pen_oriented_progress(view: Any, DISTANCE: float, ALIGNMENT: float) -> float:
    # the alignment is a cosine: graded from -1 (pointing the opposite way) to ALIGNMENT
    return mean_of([within(distance(view.obj.position, view.goal_position), DISTANCE),
                    reaching(float(np.dot(view.pen.orientation, view.pen.goal_orientation)), ALIGNMENT, -1.0)])


@progress_of(ball_at_target)
def ball_at_target_progress(view: Any, DISTANCE: float) -> float:
    return within(distance(view.obj.position, view.goal_position), DISTANCE)


SUCCESS_RULES = {
    "door": rule(door_open, ANGLE=DOOR_SUCCESS_ANGLE),
    "hammer": rule(nail_driven, DISTANCE=HAMMER_SUCCESS_DISTANCE),
    "pen": rule(pen_oriented, DISTANCE=PEN_SUCCESS_DISTANCE, ALIGNMENT=PEN_SUCCESS_ALIGNMENT),
    "relocate": rule(ball_at_target, DISTANCE=RELOCATE_SUCCESS_DISTANCE),
}
ARM_JOINT_COUNT = {"door": 4, "hammer": 2, "pen": 0, "relocate": 6}
EPISODE_STEPS = 200
"""Gymnasium-Robotics' registered time limit for all four (DAPG used 200 for door, hammer and relocate, 100 for pen)."""
SUCCESS_NOTE = " (DAPG counts an episode that held it for more than 25 steps; here it must hold when the episode ends)"


def adroit_tasks() -> list[Task]:
    tasks = []
    for name, spec in ADROIT_TASKS.items():
        success_rule = SUCCESS_RULES[name]
        tasks.append(
            Task(
                id=f"adroit/{name}",
                family="adroit",
                description=spec.description,
                env_factory=partial(make_gymnasium_robotics_env, spec.gym_id),
                view_class=AdroitView,
                read_view=partial(read_adroit_view, task=name),
                is_success=adroit_success,
                success_doc=success_rule.describe("final") + SUCCESS_NOTE,
                success_mode="final",
                success_rule=success_rule,
                scale_points=SCALE_POINTS[name],
                max_episode_steps=EPISODE_STEPS,
                default_steps=1_000_000,
                expert_reward_doc=EXPERT_DOC[name],
                action_doc=action_doc(name, ARM_JOINT_COUNT[name]),
                view_notes=spec.notes,
                budget_note=BUDGET_NOTE,
            )
        )
    return tasks
