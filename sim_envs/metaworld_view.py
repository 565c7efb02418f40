"""A MetaWorld scene as a reward reads it (the Sawyer arm, its objects, the goal), in a module of its own so that the
per-task success rules (metaworld_success) and the tasks that use them (metaworld_tasks) both import it, one way."""

from dataclasses import dataclass

import numpy as np

from sim_envs.view_base import StateView, attr


@dataclass(slots=True)
class SawyerRobot:
    """The Sawyer arm's two-finger gripper."""

    ee_position: np.ndarray = attr("(3,) tool-centre point: the midpoint between the two fingertips")
    hand_position: np.ndarray = attr("(3,) the hand (wrist) body, a few cm above the fingertips")
    gripper_openness: float = attr("in [0, 1]: distance between the fingers / 0.1 m; 0 closed, 1 fully open")
    left_pad_position: np.ndarray = attr("(3,) centre of mass of the left finger pad")
    right_pad_position: np.ndarray = attr("(3,) centre of mass of the right finger pad")
    init_ee_position: np.ndarray = attr("(3,) ee_position at the start of the episode")
    init_hand_position: np.ndarray = attr("(3,) where the hand is commanded to start the episode")
    init_left_pad_position: np.ndarray = attr("(3,) left_pad_position at the start of the episode")
    init_right_pad_position: np.ndarray = attr("(3,) right_pad_position at the start of the episode")
    pads_touch_obj: bool | None = attr(
        "True when both finger pads press on obj (a contact force on each pad); tracked only in stick-push, "
        "whose success test needs it, else None")


@dataclass(slots=True)
class SawyerObject:
    """An object of the scene, as MetaWorld tracks it."""

    position: np.ndarray = attr("(3,) position of the object's tracked point (see the task notes)")
    quaternion: np.ndarray = attr("(4,) orientation quaternion in MetaWorld's order for this object (zeros if untracked)")
    init_position: np.ndarray = attr(
        "(3,) position at the start of the episode: the same tracked point as `position`, in the first state "
        "(not MetaWorld's obj_init_pos, which for many tasks is another point of the object)")


@dataclass(slots=True)
class SawyerView(StateView):
    """A MetaWorld scene: a Sawyer arm above a table, one or two objects, and a goal position."""

    robot: SawyerRobot = attr("the arm's gripper")
    obj: SawyerObject = attr("the task's main object")
    obj2: SawyerObject | None = attr("the second object, for tasks that track two; else None")
    goal_position: np.ndarray = attr("(3,) the goal MetaWorld measures success against")
