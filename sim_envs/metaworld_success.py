"""The success rule of each MetaWorld v3 task, over `SawyerView`, from the task's own `evaluate_state`.

MetaWorld's `info["success"]` stays the judge; these predicates state its rule with its numbers, and
tests/sim_envs/test_metaworld_success_rules.py checks that each agrees with the flag on every step of
scripted-policy and random rollouts (a known disagreement is explained in the rule's `notes`).
A test's docstring is the sentence the prompt shows: `{NAME}` fields are filled from its constants.

Where MetaWorld judges a point the view does not carry (the nut's centre, the peg's head, the stick's
end, the lever's angle, the nail's travel), the predicate rebuilds it from the view's positions and
quaternions; that is the same quantity up to float rounding (~1e-16), not bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

from sim_envs.metaworld_view import SawyerView
from sim_envs.success_progress import holds, mean_of, progress_of, reaching, within
from sim_envs.success_rule import SuccessRule, distance, rule

# ---- one distance between the view's own points ---------------------------------------------------


def gripper_within(view: SawyerView, DISTANCE: float) -> bool:
    """`robot.ee_position` within {DISTANCE} m of `goal_position` (3-D distance <= {DISTANCE})"""
    return distance(view.robot.ee_position, view.goal_position) <= DISTANCE


def object_within(view: SawyerView, DISTANCE: float) -> bool:
    """`obj.position` within {DISTANCE} m of `goal_position` (3-D distance <= {DISTANCE})"""
    return distance(view.obj.position, view.goal_position) <= DISTANCE


def object_closer_than(view: SawyerView, DISTANCE: float) -> bool:
    """`obj.position` less than {DISTANCE} m from `goal_position` (3-D distance < {DISTANCE}, strictly)"""
    return distance(view.obj.position, view.goal_position) < DISTANCE


def object_x_within(view: SawyerView, DISTANCE: float) -> bool:
    """`obj.position` within {DISTANCE} m of `goal_position` along x alone: |`obj.position`[0] - `goal_position`[0]| <= {DISTANCE}
    (y and z do not count)"""
    return abs(view.obj.position[0] - view.goal_position[0]) <= DISTANCE


def object_y_within(view: SawyerView, DISTANCE: float) -> bool:
    """`obj.position` within {DISTANCE} m of `goal_position` along y alone: |`obj.position`[1] - `goal_position`[1]| <= {DISTANCE}
    (x and z do not count)"""
    return abs(view.obj.position[1] - view.goal_position[1]) <= DISTANCE


def object_z_within(view: SawyerView, DISTANCE: float) -> bool:
    """`obj.position` within {DISTANCE} m of `goal_position` along z alone: |`obj.position`[2] - `goal_position`[2]| <= {DISTANCE}
    (x and y do not count)"""
    return abs(view.obj.position[2] - view.goal_position[2]) <= DISTANCE


def object_xy_within(view: SawyerView, DISTANCE: float) -> bool:
    """`obj.position` within {DISTANCE} m of `goal_position` horizontally: the x-y distance
    sqrt(dx^2 + dy^2) <= {DISTANCE} (height does not count)"""
    return distance(view.obj.position[:2], view.goal_position[:2]) <= DISTANCE


def object_lifted_above_goal(view: SawyerView, LIFT: float) -> bool:
    """`obj.position` higher than `goal_position`, which is {LIFT} m above `obj.init_position`: `obj.position`[2] >
    `obj.init_position`[2] + {LIFT} (strictly; x and y do not count)"""
    # MetaWorld compares with its goal's z, which it computes as exactly this sum
    return bool(view.obj.position[2] > view.obj.init_position[2] + LIFT)


# ---- a derived point, a weighted distance, or several conditions ----------------------------------


def object_near_raised_goal(view: SawyerView, DISTANCE: float, HEIGHT: float, Z_WEIGHT: float) -> bool:
    """`obj.position` (the ball) within {DISTANCE} m of the hoop point h = [`goal_position`[0], `goal_position`[1], {HEIGHT}]
    in a distance that weighs height {Z_WEIGHT} times: sqrt(dx^2 + dy^2 + ({Z_WEIGHT}*dz)^2) <= {DISTANCE}, d = `obj.position` - h"""
    hoop = np.array([view.goal_position[0], view.goal_position[1], HEIGHT])
    return float(np.linalg.norm((view.obj.position - hoop) * np.array([1.0, 1.0, Z_WEIGHT]))) <= DISTANCE


def offset_object_within(view: SawyerView, DISTANCE: float, DX: float, DZ: float) -> bool:
    """the shifted point `obj.position` + [{DX}, 0, {DZ}] within {DISTANCE} m of `goal_position` (3-D distance <= {DISTANCE})"""
    point = view.obj.position + np.array([DX, 0.0, DZ])
    return distance(point, view.goal_position) <= DISTANCE


def nail_driven(view: SawyerView, TRAVEL: float) -> bool:
    """the nail (`obj2.position`) pushed into the wall more than {TRAVEL} m along +y from where it started:
    `obj2.position`[1] - `obj2.init_position`[1] > {TRAVEL} (strictly; the hammer's own position does not count)"""
    assert view.obj2 is not None, "hammer tracks the nail as obj2"
    return bool(view.obj2.position[1] - view.obj2.init_position[1] > TRAVEL)


def lever_upright(view: SawyerView, ANGLE: float, MAX_ERROR: float, HINGE_DY: float, HINGE_DZ: float) -> bool:
    """the lever's angle within {MAX_ERROR} rad of {ANGLE} rad (upright): with p = `obj.position` (the lever's end) and its
    hinge h = `obj.init_position` (the end's start) + [0, {HINGE_DY}, {HINGE_DZ}], the angle atan2(p[2] - h[2], h[1] - p[1]) (0 when the
    lever points towards -y, pi/2 when it points straight up) satisfies |angle - {ANGLE}| <= {MAX_ERROR}"""
    position, hinge = view.obj.position, view.obj.init_position + np.array([0.0, HINGE_DY, HINGE_DZ])
    angle = math.atan2(position[2] - hinge[2], hinge[1] - position[1])
    return abs(angle - ANGLE) <= MAX_ERROR


def nut_on_peg(view: SawyerView, RADIUS: float, HANDLE_LENGTH: float) -> bool:
    """the nut's centre c = `obj.position` + {HANDLE_LENGTH} * u, with u the nut's local +y axis (the second column of the
    rotation matrix of `obj.quaternion`, which is in w, x, y, z order; `obj.position` is the handle's end), is less than
    {RADIUS} m from `goal_position` (the peg's top) horizontally: x-y distance < {RADIUS}, and lower than it:
    c[2] < `goal_position`[2]"""
    centre = view.obj.position + HANDLE_LENGTH * _rotation_wxyz(view.obj.quaternion)[:, 1]
    return distance(centre[:2], view.goal_position[:2]) < RADIUS and bool(centre[2] < view.goal_position[2])


def peg_head_inserted(view: SawyerView, DISTANCE: float, HEAD_DX: float, HEAD_DZ: float, YZ_WEIGHT: float) -> bool:
    """the peg's head h = `obj.position` + R @ [{HEAD_DX}, 0, {HEAD_DZ}] (R: rotation matrix of `obj.quaternion`, which is in
    x, y, z, w order; `obj.position` is the grasp point) within {DISTANCE} m of `goal_position` in a distance that weighs
    y and z {YZ_WEIGHT} times: sqrt(dx^2 + ({YZ_WEIGHT}*dy)^2 + ({YZ_WEIGHT}*dz)^2) <= {DISTANCE}, d = h - `goal_position`"""
    head = view.obj.position + _rotation_xyzw(view.obj.quaternion) @ np.array([HEAD_DX, 0.0, HEAD_DZ])
    weights = np.array([1.0, YZ_WEIGHT, YZ_WEIGHT])
    return float(np.linalg.norm((head - view.goal_position) * weights)) <= DISTANCE


def stick_pulled_thermos(view: SawyerView, DISTANCE: float, STICK_END: float, MAX_DY: float, MAX_DZ: float) -> bool:
    """`obj2.position` (the thermos's handle) within {DISTANCE} m of `goal_position` (3-D distance <= {DISTANCE}) with the
    stick hooked in the handle: its end e = `obj.position` + {STICK_END} * u (u: the stick's local +x axis, the first column
    of the rotation matrix of `obj.quaternion`, which is in x, y, z, w order) has e[0] >= `obj2.position`[0],
    |e[1] - `obj2.position`[1]| <= {MAX_DY} and |e[2] - `obj2.position`[2]| <= {MAX_DZ}"""
    assert view.obj2 is not None, "stick-pull tracks the thermos's handle as obj2"
    handle = view.obj2.position
    end = view.obj.position + STICK_END * _rotation_xyzw(view.obj.quaternion)[:, 0]
    hooked = end[0] >= handle[0] and abs(end[1] - handle[1]) <= MAX_DY and abs(end[2] - handle[2]) <= MAX_DZ
    return distance(handle, view.goal_position) <= DISTANCE and bool(hooked)


def stick_pushed_thermos(view: SawyerView, DISTANCE: float, LIFT: float, STICK_START_Z: float) -> bool:
    """the stick is held and the thermos is at the goal: `robot.pads_touch_obj` is True (both finger pads press on the
    stick), `robot.gripper_openness` > 0, the stick (`obj.position`) is lifted: `obj.position`[2] - {LIFT} >
    {STICK_START_Z} (the stick's height at reset), and `obj2.position` (the thermos) within {DISTANCE} m of
    `goal_position` (3-D distance <= {DISTANCE})"""
    assert view.obj2 is not None, "stick-push tracks the thermos as obj2"
    robot = view.robot
    held = bool(robot.pads_touch_obj) and robot.gripper_openness > 0 and view.obj.position[2] - LIFT > STICK_START_Z
    return held and distance(view.obj2.position, view.goal_position) <= DISTANCE


# ---- progress towards each rule (sim_envs.success_progress): the same quantities, graded ------------


@progress_of(gripper_within)
def gripper_within_progress(view: SawyerView, DISTANCE: float) -> float:
    return within(distance(view.robot.ee_position, view.goal_position), DISTANCE)


@progress_of(object_within)
@progress_of(object_closer_than)
def object_within_progress(view: SawyerView, DISTANCE: float) -> float:
    return within(distance(view.obj.position, view.goal_position), DISTANCE)


@progress_of(object_x_within)
def object_x_within_progress(view: SawyerView, DISTANCE: float) -> float:
    return within(abs(view.obj.position[0] - view.goal_position[0]), DISTANCE)


@progress_of(object_y_within)
def object_y_within_progress(view: SawyerView, DISTANCE: float) -> float:
    return within(abs(view.obj.position[1] - view.goal_position[1]), DISTANCE)


@progress_of(object_z_within)
def object_z_within_progress(view: SawyerView, DISTANCE: float) -> float:
    return within(abs(view.obj.position[2] - view.goal_position[2]), DISTANCE)


@progress_of(object_xy_within)
def object_xy_within_progress(view: SawyerView, DISTANCE: float) -> float:
    return within(distance(view.obj.position[:2], view.goal_position[:2]), DISTANCE)


@progress_of(object_lifted_above_goal)
def object_lifted_progress(view: SawyerView, LIFT: float) -> float:
    return reaching(view.obj.position[2] - view.obj.init_position[2], LIFT)


@progress_of(object_near_raised_goal)
def object_near_raised_goal_progress(view: SawyerView, DISTANCE: float, HEIGHT: float, Z_WEIGHT: float) -> float:
    hoop = np.array([view.goal_position[0], view.goal_position[1], HEIGHT])
    return within(float(np.linalg.norm((view.obj.position - hoop) * np.array([1.0, 1.0, Z_WEIGHT]))), DISTANCE)


@progress_of(offset_object_within)
def offset_object_within_progress(view: SawyerView, DISTANCE: float, DX: float, DZ: float) -> float:
    return within(distance(view.obj.position + np.array([DX, 0.0, DZ]), view.goal_position), DISTANCE)


@progress_of(nail_driven)
def nail_driven_progress(view: SawyerView, TRAVEL: float) -> float:
    assert view.obj2 is not None, "hammer tracks the nail as obj2"
    return reaching(view.obj2.position[1] - view.obj2.init_position[1], TRAVEL)


@progress_of(lever_upright)
def lever_upright_progress(view: SawyerView, ANGLE: float, MAX_ERROR: float, HINGE_DY: float, HINGE_DZ: float) -> float:
    position, hinge = view.obj.position, view.obj.init_position + np.array([0.0, HINGE_DY, HINGE_DZ])
    return within(abs(math.atan2(position[2] - hinge[2], hinge[1] - position[1]) - ANGLE), MAX_ERROR)


@progress_of(nut_on_peg)
def nut_on_peg_progress(view: SawyerView, RADIUS: float, HANDLE_LENGTH: float) -> float:
    centre = view.obj.position + HANDLE_LENGTH * _rotation_wxyz(view.obj.quaternion)[:, 1]
    # "lower than the peg's top": graded by the height still to go down, in units of the radius
    return mean_of([within(distance(centre[:2], view.goal_position[:2]), RADIUS),
                    within(max(0.0, float(centre[2] - view.goal_position[2])) + RADIUS, RADIUS)])


@progress_of(peg_head_inserted)
def peg_head_inserted_progress(view: SawyerView, DISTANCE: float, HEAD_DX: float, HEAD_DZ: float, YZ_WEIGHT: float) -> float:
    head = view.obj.position + _rotation_xyzw(view.obj.quaternion) @ np.array([HEAD_DX, 0.0, HEAD_DZ])
    return within(float(np.linalg.norm((head - view.goal_position) * np.array([1.0, YZ_WEIGHT, YZ_WEIGHT]))), DISTANCE)


@progress_of(stick_pulled_thermos)
def stick_pulled_thermos_progress(view: SawyerView, DISTANCE: float, STICK_END: float, MAX_DY: float, MAX_DZ: float) -> float:
    assert view.obj2 is not None, "stick-pull tracks the thermos's handle as obj2"
    handle = view.obj2.position
    end = view.obj.position + STICK_END * _rotation_xyzw(view.obj.quaternion)[:, 0]
    return mean_of([within(distance(handle, view.goal_position), DISTANCE), holds(end[0] >= handle[0]),
                    within(abs(end[1] - handle[1]), MAX_DY), within(abs(end[2] - handle[2]), MAX_DZ)])


@progress_of(stick_pushed_thermos)
def stick_pushed_thermos_progress(view: SawyerView, DISTANCE: float, LIFT: float, STICK_START_Z: float) -> float:
    assert view.obj2 is not None, "stick-push tracks the thermos as obj2"
    robot = view.robot
    return mean_of([holds(robot.pads_touch_obj), holds(robot.gripper_openness > 0),
                    reaching(view.obj.position[2], STICK_START_Z + LIFT, STICK_START_Z),
                    within(distance(view.obj2.position, view.goal_position), DISTANCE)])


def _rotation_wxyz(quaternion: np.ndarray) -> np.ndarray:
    """The rotation matrix of a unit quaternion in MuJoCo's (w, x, y, z) order."""
    w, x, y, z = (float(q) for q in quaternion)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def _rotation_xyzw(quaternion: np.ndarray) -> np.ndarray:
    """The rotation matrix of a unit quaternion in scipy's (x, y, z, w) order (MetaWorld's `Rotation.as_quat`)."""
    x, y, z, w = (float(q) for q in quaternion)
    return _rotation_wxyz(np.array([w, x, y, z]))


METAWORLD_RULES: dict[str, SuccessRule] = {
    "assembly": rule(nut_on_peg, RADIUS=0.02, HANDLE_LENGTH=0.13),
    "basketball": rule(object_near_raised_goal, DISTANCE=0.08, HEIGHT=0.3, Z_WEIGHT=2.0),
    "bin-picking": rule(object_within, DISTANCE=0.05),
    "box-close": rule(object_closer_than, DISTANCE=0.08),
    "button-press-topdown": rule(object_z_within, DISTANCE=0.024),
    "button-press-topdown-wall": rule(object_z_within, DISTANCE=0.024),
    "button-press": rule(object_y_within, DISTANCE=0.02),
    "button-press-wall": rule(object_y_within, DISTANCE=0.03),
    "coffee-button": rule(object_y_within, DISTANCE=0.02),
    "coffee-pull": rule(object_within, DISTANCE=0.07),
    "coffee-push": rule(object_within, DISTANCE=0.07),
    "dial-turn": rule(object_within, DISTANCE=0.07),
    "disassemble": rule(object_lifted_above_goal, LIFT=0.15),
    "door-close": rule(object_within, DISTANCE=0.08),
    "door-lock": rule(object_z_within, DISTANCE=0.02),
    "door-open": rule(object_x_within, DISTANCE=0.08),
    "door-unlock": rule(object_x_within, DISTANCE=0.02),
    "hand-insert": rule(object_within, DISTANCE=0.05),
    "drawer-close": rule(object_within, DISTANCE=0.05 + 0.015),  # MetaWorld's TARGET_RADIUS + 0.015
    "drawer-open": rule(object_within, DISTANCE=0.03),
    "faucet-open": rule(offset_object_within, DISTANCE=0.07, DX=-0.04, DZ=0.03),
    "faucet-close": rule(object_within, DISTANCE=0.07),
    "hammer": rule(nail_driven, TRAVEL=0.09),
    "handle-press-side": rule(object_z_within, DISTANCE=0.02),
    "handle-press": rule(object_z_within, DISTANCE=0.02),
    "handle-pull-side": rule(object_within, DISTANCE=0.08),
    "handle-pull": rule(object_z_within, DISTANCE=0.05),
    "lever-pull": rule(lever_upright, ANGLE=math.pi / 2, MAX_ERROR=math.pi / 24, HINGE_DY=0.2, HINGE_DZ=0.00018),
    "pick-place-wall": rule(object_within, DISTANCE=0.07),
    "pick-out-of-hole": rule(object_within, DISTANCE=0.07),
    "pick-place": rule(object_within, DISTANCE=0.07),
    "plate-slide": rule(object_within, DISTANCE=0.07),
    "plate-slide-side": rule(object_within, DISTANCE=0.07),
    "plate-slide-back": rule(object_within, DISTANCE=0.07),
    "plate-slide-back-side": rule(object_within, DISTANCE=0.07),
    "peg-insert-side": rule(peg_head_inserted, DISTANCE=0.07, HEAD_DX=-0.13, HEAD_DZ=-0.01, YZ_WEIGHT=2.0),
    "peg-unplug-side": rule(object_within, DISTANCE=0.07),
    "soccer": rule(object_within, DISTANCE=0.07),
    "stick-push": rule(stick_pushed_thermos, DISTANCE=0.12, LIFT=0.01, STICK_START_Z=0.02),
    "stick-pull": rule(stick_pulled_thermos, DISTANCE=0.12, STICK_END=0.05, MAX_DY=0.04, MAX_DZ=0.06),
    "push": rule(object_within, DISTANCE=0.05),
    "push-wall": rule(object_within, DISTANCE=0.07),
    "push-back": rule(object_within, DISTANCE=0.07),
    "reach": rule(gripper_within, DISTANCE=0.05),
    "reach-wall": rule(gripper_within, DISTANCE=0.05),
    "shelf-place": rule(object_within, DISTANCE=0.07),
    "sweep-into": rule(object_xy_within, DISTANCE=0.05),
    "sweep": rule(object_within, DISTANCE=0.05),
    "window-open": rule(object_x_within, DISTANCE=0.05),
    "window-close": rule(object_x_within, DISTANCE=0.05),
}
"""Task name (as in METAWORLD_TASKS) -> its rule."""
