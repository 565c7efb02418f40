"""Keypoints for a task, from a vision model or the oracle, with every artefact saved in one folder.

Why a folder of files: the image the model saw, its raw replies, the lifted points and the reward written from them
are what a person checks before spending hours of training on a keypoint reward, and what the dashboard and the
report show; a folder that already holds `keypoints.json` is read back instead of asking again (runs resume).

Files: scene.png (what the model is shown), depth.npy (metres), annotated.png (the points drawn), prompt.json,
reply_<n>.md (each raw reply), keypoints.json (KeypointSet and the parsed answer), reward.py (the keypoint reward).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import imageio.v3 as iio
import numpy as np

from policies.io import write_json_atomic, write_text_atomic
from sim_envs.codec import read, write
from sim_envs.task import Task
from text2reward.errors import ConfigError
from text2reward.generation.llm.base import Backend, GenerationRequest
from text2reward.generation.llm.errors import BackendError
from text2reward.generation.prompting import render_template
from text2reward.keypoints.answer import MAX_WAYPOINTS, KeypointAnswer, KeypointReplyError, parse_answer, with_anchors
from text2reward.keypoints.drawing import draw_keypoints
from text2reward.keypoints.program import keypoint_program
from text2reward.keypoints.scene import Scene, keypoint_setup, lift, observe, oracle_answer
from text2reward.keypoints.sources import keypoint_finder
from text2reward.runs.keypoint_record import KeypointSet, KeypointsFile
from text2reward.runs.records import PromptContext

KEYPOINTS_FILE = "keypoints.json"
RETRIES = 1
"""A reply that is not a usable answer goes back to the model with the reason this many times."""
SYSTEM = ("You are a robotics perception assistant. You mark keypoints on images of a robot's workspace that say where "
          "to grasp and where to move things; you answer in the JSON format asked for, with nothing around it.")


def read_keypoints(folder: Path) -> KeypointSet | None:
    path = Path(folder) / KEYPOINTS_FILE
    if not path.is_file():
        return None
    return read(KeypointsFile, json.loads(path.read_text()), str(path)).keypoints


def find_keypoints(task: Task, folder: Path, source: str = "oracle", backend: Backend | None = None, seed: int = 0,
                   camera: str | None = None, size: int = 480, say: Any = None,
                   anchors: dict[str, str | None] | None = None) -> KeypointSet:
    """The task's keypoints in `folder` (read back when already there): rendered, asked for (or projected by the
    oracle), lifted to the world, drawn, and written up as a reward program. `anchors` ({keypoint: part or None})
    is a person's word on what each point moves with, over the model's (or the oracle's)."""
    finder = keypoint_finder(source)
    folder = Path(folder)
    found = read_keypoints(folder)
    if found is not None:
        return found
    setup = keypoint_setup(task)
    if finder.asks_backend:
        check_vision_backend(backend)
    folder.mkdir(parents=True, exist_ok=True)
    scene = observe(task, seed=seed, camera=camera, size=size)
    image_path = folder / "scene.png"
    _write_png(image_path, scene.shot.rgb)
    np.save(folder / "depth.npy", scene.shot.depth.astype(np.float32))
    if not finder.asks_backend:
        answer = with_anchors(oracle_answer(scene), anchors or {}, setup.anchor_names)
        keypoints = lift(answer, scene, finder.name)
        replies: list[str] = []
    else:
        assert backend is not None  # check_vision_backend refused None
        keypoints, answer, replies = ask_model(backend, task, scene, image_path, folder, seed, say, anchors or {})
    _write_png(folder / "annotated.png", draw_keypoints(scene.shot.rgb, keypoints))
    write_text_atomic(folder / "reward.py", keypoint_program(keypoints, setup))
    record = KeypointsFile(keypoints, write(answer), [f"reply_{i + 1}.md" for i in range(len(replies))])
    write_json_atomic(folder / KEYPOINTS_FILE, write(record))
    return keypoints


def check_vision_backend(backend: Backend | None) -> None:
    """A model that points at an image must see it: refuse the rule-based backend and a model not marked --vision."""
    if backend is None:
        raise ConfigError("keypoints from a model need a backend: --llm openai --vision (or --llm file), or use --keypoints oracle")
    if getattr(backend, "rule_based", False):
        raise ConfigError("the heuristic backend is rule-based and cannot see images: use --keypoints oracle, or a vision "
                          "model (--llm openai --vision) or a person (--llm file) to point")
    inner = getattr(backend, "backend", backend)  # a CachedBackend wraps the real one
    if getattr(inner, "vision", True) is False:
        raise ConfigError("keypoints are read from an image: add --vision to send it (the model must accept images)")


def keypoint_messages(task: Task, scene: Scene, image_path: Path) -> list[dict[str, Any]]:
    setup = keypoint_setup(task)
    camera = scene.shot.camera
    text = render_template("keypoints.j2", camera=camera.name, width=camera.width, height=camera.height,
                           image_path=str(image_path), description=task.description, notes=task.view_notes.rstrip("."),
                           wants_grasp=setup.wants_grasp, max_waypoints=MAX_WAYPOINTS,
                           anchors=[(name, doc) for name, _, doc in setup.anchors])
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


def ask_model(backend: Backend, task: Task, scene: Scene, image_path: Path, folder: Path, seed: int,
              say: Any = None, overrides: dict[str, str | None] | None = None) -> tuple[KeypointSet, KeypointAnswer, list[str]]:
    """Ask for keypoints; a reply that cannot be used goes back once with the reason; a second bad reply is a
    ConfigError that names the problem (the replies stay in the folder)."""
    setup = keypoint_setup(task)
    camera = scene.shot.camera
    messages = keypoint_messages(task, scene, image_path)
    write_json_atomic(folder / "prompt.json", messages)
    replies: list[str] = []
    for attempt in range(RETRIES + 1):
        reply = backend.generate(GenerationRequest(messages=messages, n=1, task_id=task.id, round=0, temperature=0.0,
                                                   seed=seed, context=PromptContext(images=[str(image_path)], asks_for_keypoints=True)))[0]
        if reply.text is None:
            raise BackendError(f"the model gave no keypoint reply: {reply.error}")
        replies.append(reply.text)
        write_text_atomic(folder / f"reply_{attempt + 1}.md", reply.text)
        try:
            answer = parse_answer(reply.text, camera.width, camera.height, setup.anchor_names, setup.wants_grasp)
            answer = with_anchors(answer, overrides or {}, setup.anchor_names)  # a person's word over the model's (their typo: a ConfigError)
            return lift(answer, scene, f"{reply.backend}:{reply.model}"), answer, replies
        except KeypointReplyError as exc:
            if attempt == RETRIES:
                raise ConfigError(f"the model's keypoints could not be used after {attempt + 1} replies: {exc} "
                                  f"(replies in {folder}); try another model, or --keypoints oracle") from None
            if say is not None:
                say(f"keypoints: {exc} -> asking again")
            messages = [*messages, {"role": "assistant", "content": reply.text},
                        {"role": "user", "content": f"That answer could not be used: {exc}. Answer again with the JSON object alone."}]
    raise AssertionError("unreachable: the last attempt returns or raises")


def _write_png(path: Path, rgb: np.ndarray) -> None:
    partial = path.with_name(path.stem + ".partial.png")
    iio.imwrite(partial, np.ascontiguousarray(rgb[..., :3]))
    partial.replace(path)
