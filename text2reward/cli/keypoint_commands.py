"""`t2r keypoints`: a task's keypoints from a vision model (or the oracle), lifted to the world, drawn, and written
up as a keypoint reward program a person can read, edit and train with `t2r train --reward FILE`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

import sim_envs
from text2reward.cli.shared import TaskFileOption, app, console, friendly, load_extra_tasks
from text2reward.errors import ConfigError
from text2reward.generation.llm import Backend, BackendSettings, backend_spec, image_backends


@app.command(epilog="Example: t2r keypoints --task metaworld/drawer-open-v3 --llm openai --model gpt-4o   |   "
                    "t2r keypoints --task fetch/push --keypoints oracle")
@friendly
def keypoints(
    task: Annotated[str, typer.Option(help="task id (a metaworld, fetch or franka task)")],
    source: Annotated[str, typer.Option("--keypoints", help="model (a vision model points; --llm openai or file) or oracle (the true positions projected)")] = "model",
    llm: Annotated[str, typer.Option(help=f"a backend that can see images: {', '.join(image_backends())} (a vision-capable model), or a "
                                          "reply-file backend (you answer, reading the saved image)")] = "openai",
    base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible endpoint (or OPENAI_BASE_URL)")] = None,
    model: Annotated[Optional[str], typer.Option(help="vision model name for --llm openai (or OPENAI_MODEL)")] = None,
    reply_file: Annotated[Optional[list[Path]], typer.Option(help="reply files for --llm file (else stdin)")] = None,
    timeout: Annotated[Optional[float], typer.Option(help="seconds to wait for the reply")] = None,
    camera: Annotated[Optional[str], typer.Option(help="camera to render (default: the task's keypoint camera)")] = None,
    size: Annotated[int, typer.Option(help="image size in pixels (square)")] = 480,
    seed: Annotated[int, typer.Option(help="seed of the reset that is pictured")] = 0,
    anchor: Annotated[Optional[list[str]], typer.Option(help="KEYPOINT=PART: what a keypoint moves with (obj, obj_start, goal, none), "
                                                             "over the model's choice; repeatable")] = None,
    out: Annotated[Optional[Path], typer.Option(help="folder for the image, the points and the reward (default: keypoints/<task>-<source>-s<seed>)")] = None,
    task_file: TaskFileOption = None,
) -> None:
    """Ask a vision model where to grasp and where to go, and write the keypoint reward."""
    from text2reward.keypoints.answer import parse_anchor_options  # with MuJoCo rendering and the templates (~140 ms): this command only
    from text2reward.keypoints.find import find_keypoints
    from text2reward.keypoints.sources import keypoint_finder

    load_extra_tasks(task_file)
    chosen = sim_envs.get_task(task)
    finder = keypoint_finder(source)  # an unknown name is refused here, before a scene renders
    if not 16 <= size <= 2048:
        raise ConfigError(f"--size must be between 16 and 2048 pixels, got {size}")
    folder = out or Path("keypoints") / f"{chosen.id.replace('/', '-')}-{source}-s{seed}"
    if (folder / "keypoints.json").is_file():
        console.print(f"{folder} already holds keypoints: showing them (delete the folder to ask again)", highlight=False, soft_wrap=True)
    anchors = parse_anchor_options(anchor)
    backend = _vision_backend(llm, model, base_url, reply_file, timeout) if finder.asks_backend else None
    found = find_keypoints(chosen, folder, source, backend, seed=seed, camera=camera, size=size,
                           say=lambda message: console.print(message, highlight=False, markup=False), anchors=anchors)
    console.print(f"{len(found.points)} keypoint(s) from {found.source} on camera {found.camera.name}:", highlight=False, soft_wrap=True)
    for point in found.points:
        where = f"on {point.anchor}" if point.anchor else "fixed"
        height = f" (+{point.height:.2f} m)" if point.height else ""
        console.print(f"  {point.name:<11} pixel ({point.pixel[0]:.0f}, {point.pixel[1]:.0f}){height} -> world "
                      f"({point.world[0]:.3f}, {point.world[1]:.3f}, {point.world[2]:.3f}) m, {where}", highlight=False, soft_wrap=True)
    if found.reason:
        console.print(f"  reason: {found.reason}", highlight=False, markup=False, soft_wrap=True)
    console.print(f"image with the points: {folder / 'annotated.png'}\nkeypoint reward: {folder / 'reward.py'} "
                  f"(train it: t2r train --task {chosen.id} --reward {folder / 'reward.py'})", highlight=False, soft_wrap=True)


def _vision_backend(llm: str, model: str | None, base_url: str | None, reply_file: list[Path] | None, timeout: float | None) -> Backend:
    """The backend that points at the image: one that can be shown images (a vision model, or a person)."""
    spec = backend_spec(llm)
    if not spec.accepts_images:
        nature = "is rule-based and " if spec.rule_based else ""
        raise ConfigError(f"the {spec.name} backend {nature}cannot see images: use --llm {' or '.join(image_backends())} with a "
                          "vision model, --llm file to answer yourself, or --keypoints oracle")
    settings = BackendSettings(model=model, base_url=base_url, vision=True, timeout=timeout,
                               reply_files=tuple(str(p) for p in reply_file or []))
    return spec.make(spec.resolve(settings))
