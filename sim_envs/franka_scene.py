"""The Franka Panda tabletop scenes, composed as MJCF from the Panda model Gymnasium-Robotics ships offline.

Why composed here: the reference Franka push / slide / pick-and-place environments load MuJoCo Menagerie's
Panda, which is downloaded at run time (unusable offline). Gymnasium-Robotics ships a Panda with meshes for its
Franka Kitchen (`envs/assets/kitchen_franka/franka_assets`): its kinematic chain, collision geometry, finger
actuators and defaults are used as they are; this module adds what the tabletop tasks need around them, as
Fetch does: a table, a pedestal, a block or puck on a free joint, a goal marker, and a mocap body welded to the
hand so that an action moves the grip point in Cartesian space. The arm's joint actuators are left out (the weld
drives the arm) and its links are gravity-compensated, so the grip point goes where the mocap goes.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

TABLE_HEIGHT = 0.4
"""z of the table top, m (Fetch's table top is at about 0.4 too)."""
BASE_POSITION = (0.0, 0.0, TABLE_HEIGHT)
"""The Panda's base sits on a pedestal flush with the table's near edge."""
TABLE_CENTRE_X = 0.7
TABLE_HALF_SIZE = (0.55, 0.6)
"""The table spans x 0.15..1.25 m from the base: room for the slide task's goals beyond the arm's reach."""
BLOCK_HALF_SIZE = 0.02
"""A 4 cm block (panda-gym's size): the open Panda fingers leave 1.5 cm either side of it (7.1 cm gap)."""
PUCK_RADIUS, PUCK_HALF_HEIGHT = 0.03, 0.01
GRIP_OFFSET = 0.226
"""Distance from the hand's last link (panda0_link7) to the grip point, along its z axis: the middle of the finger
pads (0.200-0.253 m), so a block centred there is between the pads. The fingertips reach 0.034 m beyond it."""
FINGERTIP_REACH = 0.034
ARM_DAMPING = 10
WELD_SOLREF = "0.01 1"
WELD_TORQUE_SCALE = 20
"""A stiff weld whose rotational part counts 20x: with Fetch's (0.02 s, 1x) the hand tilted by up to 40 degrees and
the grip point drifted 7 cm sideways while rising 15 cm; with these it tilts about 1 degree and drifts under 1 cm."""
SLIPPERY_FRICTION = "0.1 0.005 0.0001"
"""The slide task's table: low sliding friction, so a struck puck glides (Fetch's slide table is similar)."""


def franka_assets_dir() -> Path:
    """Gymnasium-Robotics' Panda folder (meshes and include files), from the installed package."""
    import importlib.util

    spec = importlib.util.find_spec("gymnasium_robotics")
    if spec is None or spec.origin is None:
        from sim_envs.errors import ConfigError

        raise ConfigError("the franka tasks need gymnasium-robotics (pip install -e . installs it)")
    return Path(spec.origin).parent / "envs" / "assets" / "kitchen_franka" / "franka_assets"


def _inner(text: str) -> str:
    """The content of a `<mujocoinclude>` file, without the wrapper and comments."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    match = re.search(r"<mujocoinclude>(.*)</mujocoinclude>", text, flags=re.S)
    if match is None:
        raise ValueError("not a <mujocoinclude> file")
    return match.group(1)


def _robot_parts(assets: Path) -> tuple[str, str, str]:
    """(compiler + assets + defaults, kinematic chain, finger actuators) from the shipped include files."""
    defaults = _inner((assets / "assets.xml").read_text())
    defaults = defaults.replace('meshdir="franka_assets/meshes"', f'meshdir="{assets / "meshes"}"')
    defaults = re.sub(r"<size[^>]*/>", "", defaults)  # the kitchen's actuator user data: not used here
    # the kitchen arm's joint damping (100) is tuned for its joint position servos; under a mocap weld it makes
    # the grip point trail a 5 cm command by half. 10 lets it follow by ~4 cm per 0.05 s step.
    defaults = defaults.replace('<joint damping="100"/>', f'<joint damping="{ARM_DAMPING}"/>', 1)
    chain = _inner((assets / "chain.xml").read_text())
    # gravity compensation on the arm's links: the weld alone then holds the pose (MuJoCo >= 2.3.4)
    chain = re.sub(r'<body name="(panda0_link\d)"', r'<body name="\1" gravcomp="1"', chain)
    grip_site = f'<site name="grip" pos="0 0 {GRIP_OFFSET}" size="0.006" rgba="1 0.5 0 0"/>'
    chain = re.sub(r"(<site name='end_effector'[^>]*/>)", lambda m: m.group(1) + grip_site, chain)
    actuators = _inner((assets / "actuator.xml").read_text())
    fingers = [line for line in actuators.splitlines() if "finger_joint" in line]
    return defaults, chain, "<actuator>\n" + "\n".join(fingers) + "\n</actuator>"


def _object(kind: str) -> str:
    if kind == "block":
        geom = (f'<geom name="object" type="box" size="{BLOCK_HALF_SIZE} {BLOCK_HALF_SIZE} {BLOCK_HALF_SIZE}" '
                'mass="0.1" rgba="0.85 0.2 0.2 1" condim="4" friction="1 0.005 0.0001"/>')
        z = TABLE_HEIGHT + BLOCK_HALF_SIZE
    else:  # puck
        geom = (f'<geom name="object" type="cylinder" size="{PUCK_RADIUS} {PUCK_HALF_HEIGHT}" mass="0.1" '
                'rgba="0.2 0.3 0.85 1" condim="3" friction="0.1 0.005 0.0001"/>')
        z = TABLE_HEIGHT + PUCK_HALF_HEIGHT
    return (f'<body name="object" pos="{TABLE_CENTRE_X} 0 {z}"><freejoint name="object:joint"/>{geom}'
            '<site name="object" size="0.005" rgba="0 0 0 0"/></body>')


@cache
def scene_xml(object_kind: str | None, slippery: bool = False) -> str:
    """The MJCF text of one scene: `object_kind` "block", "puck" or None (reach), `slippery` for the slide table."""
    assets = franka_assets_dir()
    defaults, chain, actuators = _robot_parts(assets)
    table_friction = SLIPPERY_FRICTION if slippery else "1 0.005 0.0001"
    hx, hy = TABLE_HALF_SIZE
    half_height = TABLE_HEIGHT / 2
    obj = _object(object_kind) if object_kind else ""
    # mocap: the grip point's target; hand pointing down (link7's z along -z) and turned 45 degrees about it, so the
    # fingers (mounted at -45 degrees on the hand) close along the world y axis, square to the block's faces
    return f"""<mujoco model="franka_tabletop">
{defaults}
  <option timestep="0.002" gravity="0 0 -9.81" cone="elliptic" impratio="1"/>
  <visual><global offwidth="960" offheight="960"/></visual>
  <asset>
    <texture name="floor" type="2d" builtin="checker" rgb1=".2 .3 .4" rgb2=".1 .15 .2" width="512" height="512"/>
    <material name="floor" texture="floor" texrepeat="4 4" reflectance="0.1"/>
  </asset>
  <worldbody>
    <light pos="0.6 0 2.5" dir="0 0 -1" diffuse=".8 .8 .8"/>
    <light pos="1.5 1 2" dir="-1 -1 -1.5" diffuse=".4 .4 .4"/>
    <geom name="floor" type="plane" size="3 3 0.1" material="floor"/>
    <camera name="front" pos="1.9 0 1.2" xyaxes="0 1 0 -0.45 0 0.9"/>
    <camera name="side" pos="0.6 -1.4 1.0" xyaxes="1 0 0 0 0.45 0.9"/>
    <body name="pedestal" pos="0 0 {half_height}"><geom type="box" size="0.12 0.12 {half_height}" rgba=".3 .3 .3 1"/></body>
    <body name="table" pos="{TABLE_CENTRE_X} 0 {half_height}">
      <geom name="table" type="box" size="{hx} {hy} {half_height}" rgba=".75 .7 .6 1" friction="{table_friction}"/>
    </body>
    <body name="base" pos="{BASE_POSITION[0]} {BASE_POSITION[1]} {BASE_POSITION[2]}">
{chain}
    </body>
    <body name="mocap" mocap="true" pos="0.5 0 0.6" quat="0 0.92388 -0.38268 0">
      <geom type="box" size="0.005 0.005 0.005" contype="0" conaffinity="0" rgba="0 0 0 0"/>
    </body>
    {obj}
    <site name="goal" pos="0.6 0 0.5" size="0.025" rgba="0.1 0.8 0.1 0.5" type="sphere"/>
  </worldbody>
  <equality>
    <weld body1="mocap" body2="panda0_link7" relpose="0 0 {-GRIP_OFFSET} 1 0 0 0" solref="{WELD_SOLREF}" torquescale="{WELD_TORQUE_SCALE}"/>
  </equality>
  {actuators}
</mujoco>
"""
