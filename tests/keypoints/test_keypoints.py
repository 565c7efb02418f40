"""Keypoint rewards (text2reward.keypoints) and vision in failure analysis: the camera model against MuJoCo's own
rendering, the strict reply parser, a vision model on a real OpenAI-protocol server on 127.0.0.1 (which answers only
when an image arrives), the oracle's lift-to-3D round trip, the keypoint reward through validation and training, and
a failed candidate's keyframes going to the model with its answer in the next prompt."""

import json
import os
import time

import numpy as np
import pytest
from openai_server import OpenAITestServer, Say
from short_training import SHORT_ALGO, SHORT_HP

from sim_envs import codec, get_task
from sim_envs.camera import shoot
from text2reward.errors import ConfigError
from text2reward.generation.llm import BackendSettings, backend_spec
from text2reward.keypoints import KeypointReplyError, combine, keypoint_program, lift, observe, oracle_answer, parse_answer
from text2reward.keypoints.find import find_keypoints, read_keypoints
from text2reward.loop import start_run
from text2reward.sandbox import validate
from text2reward.settings import RunConfig

BENCHMARK_TASKS = ["metaworld/drawer-open-v3", "metaworld/pick-place-v3", "fetch/push", "franka/push"]
ORACLE_TOLERANCE = 0.04
"""Metres between a lifted oracle point and the true position: the depth image gives the visible face of an object,
whose centre lies up to its half-size (2-2.5 cm blocks, a drawer handle) behind it, plus under a pixel at 480 px."""


def image_parts(request: dict) -> list[dict]:
    return [part for m in request["messages"] if isinstance(m["content"], list) for part in m["content"]
            if part.get("type") == "image_url"]


def sees_image(answer: str):
    """A canned vision reply: `answer` only when the request carries a PNG, else a refusal (which fails parsing)."""
    def reply(body: dict, index: int) -> str:
        images = image_parts(body)
        return answer if images and images[0]["image_url"]["url"].startswith("data:image/png;base64,") else "I see no image."
    return reply


# --- the camera model -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("task_id", BENCHMARK_TASKS)
def test_projection_and_lifting_are_inverse_and_agree_with_the_rendered_depth(task_id):
    """Project -> lift is exact; the depth MuJoCo renders at a visible body's pixel matches the camera model's depth."""
    scene = observe(get_task(task_id), seed=1)
    camera = scene.shot.camera
    points = np.random.default_rng(0).uniform(-0.3, 0.3, size=(20, 3)) + scene.anchors["obj"]
    pixels, depths = camera.project(points)
    assert np.allclose(camera.lift(pixels, depths), points, atol=1e-9)
    obj_pixel, obj_depth = camera.project(scene.anchors["obj"])
    assert camera.inside(obj_pixel[0])
    assert abs(scene.shot.depth_at(obj_pixel[0]) - obj_depth[0]) < ORACLE_TOLERANCE  # its visible face, in front of its centre


def test_an_upside_down_camera_is_turned_with_its_image():
    """MetaWorld's corner camera renders upside down: the turned image and the rolled camera still agree pixel for pixel."""
    task = get_task("metaworld/pick-place-v3")
    env = task.make_env(seed=0)
    try:
        env.reset(seed=0)
        model, data = env.unwrapped.model, env.unwrapped.data
        plain, turned = shoot(model, data, "corner", 96), shoot(model, data, "corner", 96, upside_down=True)
    finally:
        env.close()
    assert np.array_equal(turned.rgb, plain.rgb[::-1, ::-1])
    point = np.array([0.0, 0.7, 0.05])
    u, v = plain.camera.project(point)[0][0]
    ut, vt = turned.camera.project(point)[0][0]
    assert ut == pytest.approx(96 - u) and vt == pytest.approx(96 - v)


# --- the reply parser -----------------------------------------------------------------------------------------

GOOD_ANSWER = {"grasp": {"x": 200, "y": 180, "anchor": "obj"}, "waypoints": [{"x": 210, "y": 200, "height": 0.1}],
               "target": {"x": 300, "y": 250, "anchor": "goal"}, "reason": "take the block, carry it to the marker"}
ANCHORS = ("obj", "obj_start", "goal")


def test_a_good_answer_is_parsed_in_path_order():
    answer = parse_answer("```json\n" + json.dumps(GOOD_ANSWER) + "\n```", 480, 480, ANCHORS, wants_grasp=True)
    assert [p.name for p in answer.points] == ["grasp", "waypoint_1", "target"]
    assert answer.points[1].height == 0.1 and answer.points[0].anchor == "obj" and answer.reason.startswith("take")


@pytest.mark.parametrize("reply, problem", [
    ("Sure! The grasp point is at (200, 180).", "not a JSON object"),
    ('{"grasp": {"x": 200, "y": 180}, "target": {"x": 480, "y": 10}}', "target.x = 480 is outside the image"),
    ('{"grasp": {"x": 200, "y": -3}, "target": {"x": 10, "y": 10}}', "grasp.y = -3 is outside the image"),
    ('{"grasp": {"x": 200, "y": 180}, "goal": {"x": 10, "y": 10}}', "unknown key(s) 'goal'"),
    ('{"grasp": {"x": 200, "y": 180}}', "no 'target' point"),
    ('{"target": {"x": 10, "y": 10}}', "no 'grasp' point"),
    ('{"grasp": [200, 180], "target": {"x": 10, "y": 10}}', "grasp must be an object"),
    ('{"grasp": {"x": 1, "y": 1, "anchor": "handle"}, "target": {"x": 10, "y": 10}}', "'handle' is not a part of this scene"),
    ('{"grasp": {"x": 1, "y": 1}, "target": {"x": 10, "y": 10, "height": 3}}', "height is metres above the surface"),
    ('{"grasp": {"x": 1, "y": 1}, "target": {"x": 10, "y": 10}, "waypoints": ' + json.dumps([{"x": 1, "y": 1}] * 5) + "}",
     "5 waypoints: give at most 4"),
    ('{"grasp": {"x": 1, "y": 1}, "target": {"x": 10, "y": 10}', "not valid JSON"),
])
def test_a_malformed_answer_is_one_line_naming_the_problem(reply, problem):
    with pytest.raises(KeypointReplyError) as caught:
        parse_answer(reply, 480, 480, ANCHORS, wants_grasp=True)
    assert problem in str(caught.value) and "\n" not in str(caught.value)


def test_a_fenced_answer_is_read_in_linear_time():
    """A vision model's reply is read before any jail: a fence then blank lines (quadratic before: 8,000 lines took
    0.6 s of CPU, 150,000 about three minutes) costs this process well under a second of its own CPU."""
    for reply in ("```" + "\n" * 150_000 + "x", "```" + " \n" * 150_000 + "x```"):
        start = time.thread_time()
        with pytest.raises(KeypointReplyError):
            parse_answer(reply, 480, 480, ANCHORS, wants_grasp=True)
        assert time.thread_time() - start < 1.0
    for fenced in ("```\n{}\n```", "```JSON  \n\n{}```"):
        answer = fenced.format(json.dumps(GOOD_ANSWER))
        assert [p.name for p in parse_answer(answer, 480, 480, ANCHORS, wants_grasp=True).points] == ["grasp", "waypoint_1", "target"]


# --- the oracle, the reward program ------------------------------------------------------------------------------


@pytest.mark.parametrize("task_id", BENCHMARK_TASKS)
def test_oracle_points_lift_back_to_the_true_positions(task_id):
    scene = observe(get_task(task_id), seed=0)
    keypoints = lift(oracle_answer(scene), scene, "oracle")
    for (name, true, anchor, _), point in zip(scene.truths, keypoints.points):
        assert point.name == name and point.anchor == anchor
        assert np.linalg.norm(np.array(point.world) - true) < ORACLE_TOLERANCE, (name, point.world, true)


def test_a_point_in_the_air_is_lifted_by_its_height_above_the_surface_below():
    """Fetch's pick-and-place goal floats unseen above the table (seed 1: 40 cm): the oracle points at the surface
    below it and gives its height, and the lift puts it back within a centimetre."""
    scene = observe(get_task("fetch/pick_and_place"), seed=1)
    _, true, _, below = scene.truths[1]
    target = oracle_answer(scene).point("target")
    assert target.height == pytest.approx(true[2] - below[2]) and target.height > 0.3
    keypoints = lift(oracle_answer(scene), scene, "oracle")
    assert np.linalg.norm(np.array(keypoints.point("target").world) - true) < 0.01


@pytest.mark.parametrize("task_id", ["metaworld/drawer-open-v3", "franka/push", "franka/reach"])
def test_the_keypoint_reward_validates_in_the_sandbox_and_rises_towards_success(task_id):
    """The program passes the same validation as a model's code, and a scripted success ends with more reward than it
    started with (the keypoints lead where the task goes)."""
    task = get_task(task_id)
    scene = observe(task, seed=0)
    code = keypoint_program(lift(oracle_answer(scene), scene, "oracle"), task.keypoints)
    report = validate(code, task)
    assert report.ok, report.errors
    from policies.reward_program import compile_reward

    reward = compile_reward(code)
    env = task.make_env(seed=0)
    try:
        observation, _ = env.reset(seed=0)
        policy = task.scripted_policy()
        first = reward(task.view(env), np.zeros(env.action_space.shape))[0]
        for _ in range(task.max_episode_steps):
            observation, _, terminated, truncated, info = env.step(policy(observation))
            last = reward(task.view(env), np.zeros(env.action_space.shape))[0]
            if terminated or truncated:
                break
    finally:
        env.close()
    assert last > first + 0.5


def test_combined_reward_keeps_both_sets_of_components():
    task = get_task("fetch/push")
    scene = observe(task, seed=0)
    keypoint_code = keypoint_program(lift(oracle_answer(scene), scene, "oracle"), task.keypoints)
    code = "import numpy as np\n\n# mine\ndef compute_dense_reward(self, action):\n    d = float(np.linalg.norm(self.obj.position - self.goal_position))\n    return -d, {'to_goal': -d}\n"
    combined = combine(code, keypoint_code)
    assert "# mine" in combined  # the model's program is kept as written
    assert validate(combined, task).ok
    with pytest.raises(ConfigError, match="KP_MOVE_WEIGHT"):
        combine(code + "\nKP_MOVE_WEIGHT = 3.0\n", keypoint_code)


# --- a vision model on a real server ------------------------------------------------------------------------------


def vision_backend(server: OpenAITestServer):
    os.environ.setdefault("OPENAI_API_KEY", "test-key")
    return backend_spec("openai").make(BackendSettings(model="vision-model", base_url=server.base_url, vision=True, max_retries=0))


def test_a_vision_model_points_and_its_points_are_lifted_drawn_and_written_up(tmp_path):
    task = get_task("franka/push")
    scene = observe(task, seed=0)
    gu, gv = scene.shot.camera.project(scene.anchors["obj"])[0][0]
    answer = {"grasp": {"x": round(gu), "y": round(gv), "anchor": "obj"}, "target": {"x": 100, "y": 400},
              "reason": "push the red block"}
    with OpenAITestServer(script=[Say(sees_image(json.dumps(answer)))]) as server:
        keypoints = find_keypoints(task, tmp_path / "kp", "model", vision_backend(server), seed=0)
        (request,) = server.chat_requests
    assert len(image_parts(request)) == 1  # the image was sent
    assert keypoints.source == "openai:vision-model" and keypoints.reason == "push the red block"
    grasp = keypoints.point("grasp")
    assert np.linalg.norm(np.array(grasp.world) - scene.anchors["obj"]) < ORACLE_TOLERANCE
    assert np.allclose(np.array(grasp.offset), np.array(grasp.world) - scene.anchors["obj"])
    assert keypoints.point("target").anchor is None  # a fixed point in the world
    folder = tmp_path / "kp"
    import imageio.v3 as iio

    assert not np.array_equal(iio.imread(folder / "annotated.png"), iio.imread(folder / "scene.png"))
    assert (folder / "reply_1.md").read_text() == json.dumps(answer)
    assert codec.write(read_keypoints(folder)) == codec.write(keypoints)  # read back as written (the camera holds arrays)
    assert validate((folder / "reward.py").read_text(), task).ok
    assert "KP_TARGET = np.array(" in (folder / "reward.py").read_text()


def test_a_malformed_reply_goes_back_once_with_the_reason_then_stops(tmp_path):
    task = get_task("fetch/push")
    good = json.dumps({"grasp": {"x": 200, "y": 250}, "target": {"x": 300, "y": 330}})
    with OpenAITestServer(script=[Say('{"grasp": {"x": 900, "y": 10}, "target": {"x": 1, "y": 1}}'), Say(sees_image(good))]) as server:
        keypoints = find_keypoints(task, tmp_path / "retry", "model", vision_backend(server))
        first, second = server.chat_requests
    assert keypoints.point("grasp").pixel == (200.0, 250.0)
    said = second["messages"][-1]["content"]
    text = said if isinstance(said, str) else " ".join(p.get("text", "") for p in said)
    assert "grasp.x = 900 is outside the image" in text and len(image_parts(second)) == 1

    with OpenAITestServer(script=[Say("The block is on the left."), Say("Still prose.")]) as server:
        with pytest.raises(ConfigError, match="could not be used after 2 replies: the reply is not a JSON object"):
            find_keypoints(task, tmp_path / "prose", "model", vision_backend(server))
        assert len(server.chat_requests) == 2
    assert not (tmp_path / "prose" / "keypoints.json").exists() and (tmp_path / "prose" / "reply_2.md").is_file()


def test_keypoints_need_a_model_that_sees(tmp_path):
    task = get_task("fetch/push")
    with pytest.raises(ConfigError, match="cannot see images"):
        find_keypoints(task, tmp_path, "model", backend_spec("heuristic").make(BackendSettings()))
    with pytest.raises(ConfigError, match="add --vision"):
        find_keypoints(task, tmp_path, "model", backend_spec("openai").make(BackendSettings(model="m", base_url="http://127.0.0.1:9/v1")))
    with pytest.raises(ConfigError, match="no keypoint setup"):
        find_keypoints(get_task("hopper/forward"), tmp_path, "oracle")
    with pytest.raises(ConfigError, match="add --vision"):
        RunConfig.of(task_id="fetch/push", backend="openai", model="m", reward_source="keypoints", keypoints="model").validate()
    with pytest.raises(ConfigError, match="--reward-mode dense"):
        RunConfig.of(task_id="fetch/push", reward_source="keypoints", reward_mode="potential").validate()


# --- the loop ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_keypoint_reward_source_trains_its_program_like_a_model_reward(tmp_path):
    config = RunConfig.of(task_id="fetch/push", reward_source="keypoints", keypoints="oracle", rounds=1, samples=1, steps=200,
                          workers=1, final_seeds=0, compare_expert=False, eval_freq=200, eval_episodes=1, overrides=SHORT_HP, algo=SHORT_ALGO, video=False)
    store = start_run(config, tmp_path)
    (candidate,) = store.candidates()
    assert candidate.backend == "keypoints" and candidate.model == "program from oracle keypoints"
    assert candidate.status == "trained" and candidate.validation.ok
    code = (store.root / candidate.code_file).read_text()
    assert code == (store.root / "keypoints" / "reward.py").read_text()
    assert {"reach_grasp", "path_progress", "at_target"} <= set(candidate.training_result.components[-1].components)


FAILING = '''```python
import numpy as np

def compute_dense_reward(self, action):
    distance = float(np.linalg.norm(self.robot.ee_position - self.goal_position))
    return -distance, {"distance": -distance}
```'''
ANALYSIS = "The gripper drifts past the goal and hovers 10 cm above it; the distance term is too flat near the goal."


@pytest.mark.slow
def test_failure_analysis_shows_the_keyframes_and_its_answer_reaches_the_next_prompt(tmp_path):
    script = [Say(FAILING), Say(sees_image(ANALYSIS)), Say(FAILING.replace("-distance,", "-2.0 * distance,"))]
    with OpenAITestServer(script=script) as server:
        os.environ.setdefault("OPENAI_API_KEY", "test-key")
        config = RunConfig.of(task_id="fetch/reach", backend="openai", model="vision-model", base_url=server.base_url,
                              vision=True, vision_analysis=True, rounds=2, samples=1, steps=150, workers=1, final_seeds=0,
                              compare_expert=False, eval_freq=150, eval_episodes=1, overrides=SHORT_HP, algo=SHORT_ALGO, success_threshold=1.01)
        store = start_run(config, tmp_path)
        requests = server.chat_requests
    asked = requests[1]
    assert len(image_parts(asked)) == 4 and "What went wrong?" in json.dumps(asked["messages"])
    first = store.read_json("rounds/r0/s0/candidate.json")
    assert first["vision_analysis"]["model"] == "openai:vision-model"
    assert (store.root / first["vision_analysis"]["file"]).read_text() == ANALYSIS
    next_prompt = json.dumps(requests[2]["messages"])
    assert ANALYSIS in next_prompt and "its reading, not a measurement" in next_prompt
    context = store.read_json("rounds/r1/prompt.json")["context"]
    assert context["vision_analysis"] == {"candidate": "r0-s0", "images": first["keyframes"], "model": "openai:vision-model"}


# --- the command ---------------------------------------------------------------------------------------------


def t2r(*args: str, cwd=None):
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OPENAI_MODEL"}
    return subprocess.run([sys.executable, "-m", "text2reward.cli", *args], capture_output=True, text=True, cwd=cwd, env=env)


def test_t2r_keypoints_writes_the_folder_and_says_where(tmp_path):
    result = t2r("keypoints", "--task", "fetch/push", "--keypoints", "oracle", "--out", str(tmp_path / "kp"))
    assert result.returncode == 0, result.stderr
    assert "grasp" in result.stdout and "target" in result.stdout and str(tmp_path / "kp" / "reward.py") in result.stdout
    assert {p.name for p in (tmp_path / "kp").iterdir()} >= {"scene.png", "annotated.png", "depth.npy", "keypoints.json", "reward.py"}
    refused = t2r("keypoints", "--task", "fetch/push", "--llm", "heuristic", "--out", str(tmp_path / "no"))
    assert refused.returncode == 1 and "cannot see images" in refused.stderr and "Traceback" not in refused.stderr
    no_model = t2r("keypoints", "--task", "fetch/push", "--out", str(tmp_path / "no"), cwd=tmp_path)
    assert no_model.returncode == 1 and "pass --model (or set OPENAI_MODEL)" in no_model.stderr


def test_a_person_names_what_a_keypoint_moves_with(tmp_path):
    """`--anchor target=obj_start` re-anchors the oracle's goal-anchored target to where the object started; a wrong
    name or part is one line."""
    task = get_task("fetch/push")
    keypoints = find_keypoints(task, tmp_path / "a", "oracle", anchors={"target": "obj_start", "grasp": None})
    assert keypoints.point("target").anchor == "obj_start" and keypoints.point("grasp").anchor is None
    code = (tmp_path / "a" / "reward.py").read_text()
    assert "self.obj.init_position + KP_TARGET_OFFSET" in code and "KP_GRASP = np.array(" in code
    with pytest.raises(ConfigError, match="the keypoints are grasp, target"):
        find_keypoints(task, tmp_path / "b", "oracle", anchors={"handle": "obj"})
    with pytest.raises(ConfigError, match="can move with are obj, obj_start, goal"):
        find_keypoints(task, tmp_path / "c", "oracle", anchors={"grasp": "drawer"})
    from text2reward.keypoints.answer import parse_anchor_options

    assert parse_anchor_options(["grasp=obj", "target=none"]) == {"grasp": "obj", "target": None}
    with pytest.raises(ConfigError, match="write KEYPOINT=PART"):
        parse_anchor_options(["grasp"])


@pytest.mark.slow
def test_a_person_answers_through_reply_files_and_the_run_resumes_where_it_waited(tmp_path):
    """`--llm file`: the keypoint answer is the first reply file; the run then waits for a code reply, and a resume
    with it goes on (the keypoint reply is counted, so the code reply is not mistaken for it)."""
    task = get_task("franka/push")
    scene = observe(task, seed=0)
    gu, gv = scene.shot.camera.project(scene.anchors["obj"])[0][0]
    answer = tmp_path / "keypoints.md"
    answer.write_text(json.dumps({"grasp": {"x": round(gu), "y": round(gv), "anchor": "obj"}, "target": {"x": 120, "y": 380}}))
    config = RunConfig.of(task_id="franka/push", backend="file", reply_files=[str(answer)], vision=True, reward_source="code+keypoints",
                          keypoints="model", rounds=1, samples=1, steps=200, workers=1, final_seeds=0, compare_expert=False,
                          eval_freq=200, eval_episodes=1, overrides=SHORT_HP, algo=SHORT_ALGO, video=False, screen=False)
    store = start_run(config, tmp_path / "runs")
    assert store.state().status == "waiting_for_replies"
    assert read_keypoints(store.root / "keypoints").source == "file:file"
    code = tmp_path / "code.md"
    code.write_text(FAILING.replace("self.robot.ee_position - self.goal_position", "self.obj.position - self.goal_position"))
    from text2reward.loop import resume_run

    resume_run(tmp_path / "runs", store.run_id, reply_files=[str(code)])
    (candidate,) = store.candidates()
    assert candidate.status == "trained", candidate.reason
    program = (store.root / candidate.code_file).read_text()
    assert "def code_reward(self, action):" in program and "def keypoint_reward(self, action):" in program
    assert {"code_distance", "kp_path_progress"} <= set(candidate.training_result.components[-1].components)


def test_a_model_name_cannot_break_out_of_the_programs_docstring():
    """The source (a model's name, a person's choice) is written into the program's docstring: quotes in it must not
    end the string and turn the rest into code."""
    import ast

    task = get_task("fetch/push")
    scene = observe(task, seed=0)
    code = keypoint_program(lift(oracle_answer(scene), scene, 'openai:m"""\nimport os\n"""'), task.keypoints)
    module = ast.parse(code)
    assert [type(node).__name__ for node in module.body[:2]] == ["Expr", "Import"]  # the docstring, then numpy alone
    assert [alias.name for alias in module.body[1].names] == ["numpy"]
    assert validate(code, task).ok
