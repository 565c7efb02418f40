"""The synthesis loop: prompt -> K replies -> extract -> validate (fix) -> screen -> train in parallel
-> evaluate -> keep the best -> feedback -> next round; then re-train the best over seeds beside the
expert reward.

Every stage writes its artefact atomically before the next begins, and every stage first looks for its
artefact: so `resume` is the same function as `run`, and an interrupted run redoes only unfinished work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sim_envs import get_task, load_task_file
from sim_envs.task import Task
from text2reward.errors import ConfigError, RewardProgramError, Text2RewardError
from text2reward.generation.llm.base import Backend, GenerationRequest
from text2reward.generation.llm.errors import BackendError, RepliesExhausted
from text2reward.runs.lock import RunLock
from text2reward.runs.ranking import best_candidate, tie_summary
from text2reward.runs.records import Candidate, FinalSummary, RoundSummary, has_training, training_summary
from text2reward.runs.records import short_reason as shorten
from text2reward.runs.store import RunConfig, RunStore, index_run
from text2reward.training.early_stop import EarlyStopper
from text2reward.training.job import TRAIN_DIR, TrainJob
from text2reward.training.pool import JobDisplay, JobOutcome, run_jobs

Progress = Callable[[str], None]
KEYPOINTS_DIR = "keypoints"
"""In a run folder: the keypoints of a keypoint reward source (text2reward.keypoints.find lists its files)."""
PENDING_PROMPT_FILE = "pending_prompt.md"
"""Where a run driven by reply files writes the prompt it waits on (`t2r prompt --run RUN` prints it)."""


def replies_used(store: RunStore) -> int:
    """How many replies the run has already consumed: saved rounds plus fix requests."""
    rounds = sum(sum(1 for reply in store.read_json(p.relative_to(store.root)) or [] if reply.get("backend") != "keypoints")
                 for p in store.root.glob("rounds/r*/replies.json"))  # a keypoint program is no reply of the backend's
    keypoints = len(list(store.root.glob(f"{KEYPOINTS_DIR}/reply_*.md"))) if store.config().backend == "file" else 0
    return rounds + keypoints + len(list(store.root.glob("rounds/r*/s*/fix_prompt_*.json")))


def make_run_backend(config: RunConfig, store: RunStore) -> Backend:
    from text2reward.generation.llm import make_backend
    from text2reward.generation.llm.cache import CachedBackend, ReplyCache
    from text2reward.preflight import backend_options

    options: dict[str, Any] = {}
    if config.backend == "openai":
        options = backend_options(config)
    elif config.backend == "file":
        options = {"paths": config.reply_files or None}
        if config.reply_files:
            options["start"] = replies_used(store)
    elif config.backend == "heuristic":
        options = {"seed": config.seed}
    backend = make_backend(config.backend, **options)
    if config.backend == "file" or not config.cache:
        return backend  # pasted replies are the record themselves; --no-cache asks the model again
    return CachedBackend(backend, ReplyCache(store.runs_dir / "cache"))


ROUND_ATTEMPTS = 2
"""A round's candidate whose reward process was stopped or killed by the machine (never by its own code) trains again."""
FINAL_ATTEMPTS = 3
"""A final-stage training that fails for a cause other than the reward's own (its process stopped or killed by the
machine, a worker that died, a library error) is tried this many times in all before it is recorded as failed."""

# --- the run -------------------------------------------------------------------------------------------------


class Loop:
    def __init__(self, store: RunStore, backend: Backend | None = None, progress: Progress | None = None,
                 display: JobDisplay | None = None):
        self.store = store
        self.display = display
        self.config = store.config()
        if self.config.task_file:
            load_task_file(self.config.task_file)
        self.task: Task = get_task(self.config.task_id)
        self.backend = backend or make_run_backend(self.config, store)
        self.say = progress or (lambda message: None)
        self.resources = ExitStack()
        """What the run holds until it ends: the Ray session, opened when the first jobs train on Ray."""
        self.ray_open = False

    # --- top level -----------------------------------------------------------------------------
    def run(self) -> FinalSummary:
        with RunLock(self.store.root, say=self.say), self.resources:
            return self._run_locked()

    def _run_locked(self) -> FinalSummary:
        started = time.perf_counter()
        state = self.store.set_state(status="running", created=self.store.state().get("created", time.time()),
                                     error=None, reason=None, pending_prompt=None)
        index_run(self.store)
        try:
            self.ensure_keypoints()
            redone = False
            for round_index in range(self.config.rounds):
                summary = self.store.round_summary(round_index)
                if summary is None or "interrupted" in summary["statuses"].values():
                    summary, redone = self.run_round(round_index), True
                best = self.overall_best()
                self.store.set_state(rounds_done=round_index + 1, best=best and best["id"],
                                     best_success=best and best["training"]["success_rate"])
                index_run(self.store)
                waiting = any(e.get("for_round", -1) > round_index for e in self.store.events())
                if best and best["training"]["success_rate"] >= self.config.success_threshold and not waiting:
                    self.say(f"success {best['training']['success_rate']:.2f} reached the threshold: stopping early")
                    break
            redone = self.tune_best() or redone
            final = self.store.final_summary()
            if redone or final is None or final_needs_training(final):
                final = self.finalize()
            from text2reward.runs.report import write_report

            elapsed = state.get("wall_seconds", 0.0) + time.perf_counter() - started
            interrupted = [c["id"] for c in self.store.candidates() if c["status"] == "interrupted"]
            status, reason = "finished", None
            if interrupted or final.get("interrupted"):
                status = "incomplete"
                self.say(f"some training was interrupted ({', '.join(interrupted) or 'final comparison'}): "
                         f"`t2r resume {self.store.run_id} --runs-dir {self.store.runs_dir}` finishes it")
            elif final.get("best_candidate") is None:
                status, reason = "no_result", no_result_reason(self.store.candidates())
            report = write_report(self.store, status, reason)
            self.store.set_state(status=status, reason=reason, wall_seconds=round(elapsed, 1),
                                 report=self.store.relative(report))
            return final
        except RepliesExhausted as exc:
            elapsed = self.store.state().get("wall_seconds", 0.0) + time.perf_counter() - started
            self.wait_for_replies(exc)
            self.store.set_state(wall_seconds=round(elapsed, 1))
            return {}
        except BaseException as exc:
            elapsed = self.store.state().get("wall_seconds", 0.0) + time.perf_counter() - started
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            self.store.set_state(status=status, error=str(exc)[:500], wall_seconds=round(elapsed, 1))
            raise
        finally:
            index_run(self.store)

    def tune_best(self) -> bool:
        """`--tune N`: tune the best candidate's constants (text2reward.tuning) once the rounds are done; True when
        this call trained something (so the final comparison is redone for a tuned winner). A resume goes on with
        the same study; a reward with nothing to tune, or a best that already reached the threshold, is said and skipped."""
        if self.config.tune <= 0:
            return False
        from text2reward.tuning import tune_candidate

        best = best_candidate([c for c in self.store.candidates() if not c.get("parent")])
        if best is None:
            return False
        if best["training"]["success_rate"] >= self.config.success_threshold:
            self.say(f"tuning skipped: {best['id']} already reached the success threshold")
            return False
        tuned_before = self.store.candidate(f"{best['id']}-tuned")
        if tuned_before is not None and (tuned_before.get("tuned") or {}).get("trials", 0) >= self.config.tune:
            return False
        self.say(f"tuning {best['id']}'s constants: {self.config.tune} trial(s)")
        try:
            tuned = tune_candidate(self.store, best["id"], self.config.tune, progress=self.say, display=self.display,
                                   runner=lambda jobs, workers, **options: self.run_jobs(jobs, **options))  # the run's executor
        except Text2RewardError as exc:  # no UPPER_CASE constants, no trial completed: the run keeps its result
            self.say(f"tuning skipped: {exc}")
            return False
        self.say(f"{tuned['id']}: success {tuned['training']['success_rate']:.2f} (parent {best['training']['success_rate']:.2f})")
        return True

    def wait_for_replies(self, exc: RepliesExhausted) -> None:
        """Reply files ran out: write the prompt that needs answers and stop cleanly; a resume with new
        `--reply-file`s goes on from exactly here (finished stages are files, and are never redone)."""
        from text2reward.generation.llm.file_backend import render_prompt

        path = self.store.write_text(PENDING_PROMPT_FILE, render_prompt(exc.request))
        self.store.set_state(status="waiting_for_replies", pending_prompt=self.store.relative(path),
                             replies_needed=exc.needed)
        self.say(f"waiting for {exc.needed} reply(ies) to the prompt in {path}")

    def overall_best(self) -> Candidate | None:
        return best_candidate(self.store.candidates())

    # --- one round -------------------------------------------------------------------------------
    def run_round(self, round_index: int) -> RoundSummary:
        if round_index == 0 and self.config.reward_source == "keypoints":
            self.say("round 0: the reward written from the keypoints is the round's candidate (no model is asked)")
        else:
            self.say(f"round {round_index}: asking {self.backend_label()} for {self.config.samples} reward(s)")
        messages, context = self.round_prompt(round_index)
        replies = self.round_replies(round_index, messages, context)
        for sample, reply in enumerate(replies):
            self.prepare_candidate(round_index, sample, reply, messages)
        self.train_round(round_index)
        self.analyse_failures(round_index)
        candidates = self.store.candidates(round_index)
        best = best_candidate(candidates)
        summary: RoundSummary = {
            "round": round_index,
            "best": best["id"] if best else None,
            "best_success": best["training"]["success_rate"] if best else None,
            "statuses": {c["id"]: c["status"] for c in candidates},
        }
        ties = tie_summary(candidates)
        if ties:  # candidates within the best's noise, and how the best was chosen among them
            summary["tied"], summary["tie_break"] = ties["tied"], ties["tie_break"]
        self.store.write_round_summary(summary)
        self.say(f"round {round_index}: " + ", ".join(f"{c['id']} {self.describe(c)}" for c in candidates))
        return summary

    def backend_label(self) -> str:
        if getattr(self.backend, "rule_based", False) or self.config.backend == "heuristic":
            return "the rule-based heuristic backend (no language model)"
        return f"{self.config.backend}:{self.config.model or ''}".rstrip(":")

    @staticmethod
    def describe(candidate: Candidate) -> str:
        if candidate["status"] == "trained":
            return f"success {candidate['training']['success_rate']:.2f}"
        if candidate["status"] == "stopped_early":
            stop = candidate.get("stopped_early") or {}
            return (f"stopped early at {stop.get('steps', '?')} steps, success {candidate['training']['success_rate']:.2f} "
                    f"({shorten(str(stop.get('reason', '')), 100)})")
        numbers = f"; {candidate['failure_numbers']}" if candidate.get("failure_numbers") else ""
        return f"{candidate['status']} ({shorten(candidate.get('reason', ''), 160)}{numbers}; in full in its candidate.json)"

    def round_prompt(self, round_index: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Round 0: the task prompt. Later: feedback on the best so far (human feedback first)."""
        from text2reward.generation import prompting

        saved = self.store.read_json(f"rounds/r{round_index}/prompt.json")
        if saved is not None:
            return saved["messages"], saved["context"]
        context: dict[str, Any] = {}
        best = self.overall_best()
        human = [e for e in self.store.events() if e.get("for_round") == round_index]
        if human:
            messages, context = self.human_prompt(human[-1])
            context["feedback_event"] = human[-1]["id"]
        elif best is None:
            messages = prompting.build_initial_messages(self.task, few_shot=self.config.few_shot, reward_mode=self.config.reward_mode)
            if self.config.reward_source == "code+keypoints":
                messages = prompting.with_keypoint_section(messages, self.keypoint_summary(), self.keypoint_code())
                context["keypoints"] = self.store.relative(self.store.root / KEYPOINTS_DIR / "keypoints.json")
        else:
            from text2reward.feedback import component_stats

            code = self.store.root.joinpath(best["code_file"]).read_text()
            feedback_file = best.get("feedback_file")
            feedback = self.store.root.joinpath(feedback_file).read_text() if feedback_file else ""
            analysis = best.get("vision_analysis")
            if analysis:  # a vision model's reading of the frames joins the numbers (and the run records it)
                from text2reward.feedback import vision_feedback_section

                answer = self.store.root.joinpath(analysis["file"]).read_text()
                feedback = (feedback.rstrip() + "\n\n" + vision_feedback_section(answer, analysis["model"])).strip()
            contrast = self.round_contrast(round_index - 1, best)
            messages = prompting.build_feedback_messages(self.task, code, feedback, self.config.reward_mode, contrast_text=contrast)
            context = {
                "previous_best_code": code,
                "component_stats": component_stats(best["training_result"]),
                "success_rate": best["training"]["success_rate"],
            }
            if analysis:
                context["vision_analysis"] = {"candidate": best["id"], "images": analysis["images"], "model": analysis["model"]}
        shown = self.shown_candidate(human[-1] if human else None, best)
        if self.config.vision and shown and shown.get("keyframes"):
            # a vision-capable model sees what the robot did (the backend attaches these to the prompt)
            context["images"] = [str(self.store.root / k) for k in shown["keyframes"]]
        context["round"] = round_index
        context["reward_mode"] = self.config.reward_mode  # what the program defines (the heuristic backend reads it too)
        self.store.write_json(f"rounds/r{round_index}/prompt.json", {"messages": messages, "context": context})
        return messages, context

    def round_contrast(self, round_index: int, best: Candidate) -> str:
        """The previous round's other candidates beside the best so far (feedback.compose.round_contrast)."""
        from text2reward.feedback.compose import candidate_summary, round_contrast

        def code(candidate: Candidate) -> str | None:
            return self.store.root.joinpath(candidate["code_file"]).read_text() if candidate.get("code_file") else None

        others = [c for c in self.store.candidates(round_index) if c["id"] != best["id"]]
        ties = tie_summary([best, *(c for c in others if has_training(c))])
        return round_contrast(candidate_summary(best, code(best)), [candidate_summary(c, code(c)) for c in others],
                              ties.get("tied", []), ties.get("tie_break", ""))

    def shown_candidate(self, event: dict[str, Any] | None, best: Candidate | None) -> Candidate | None:
        """The candidate whose rollout the next prompt talks about."""
        if event is None:
            return best
        return self.store.candidate(event.get("candidate") or event.get("best"))

    def human_prompt(self, event: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        from text2reward.generation import prompting

        def load(candidate_id: str) -> tuple[Candidate, str, str]:
            candidate = self.store.candidate(candidate_id)
            if candidate is None:
                raise ConfigError(f"human feedback {event.get('id')} names candidate {candidate_id!r}, which run "
                                  f"{self.store.run_id} does not have; fix or remove it in events.json")
            code = self.store.root.joinpath(candidate["code_file"]).read_text()
            return candidate, code, candidate.get("behaviour_text", "")

        if event["type"] == "preference":
            _, best_code, best_text = load(event["best"])
            _, worst_code, worst_text = load(event["worst"])
            messages = prompting.build_preference_messages(self.task, best_code, worst_code, best_text, worst_text, event.get("text"),
                                                           self.config.reward_mode)
            return messages, {"previous_best_code": best_code, "critique": event.get("text") or ""}
        _, code, behaviour = load(event["candidate"])
        messages = prompting.build_human_feedback_messages(self.task, code, behaviour, event["text"], self.config.reward_mode)
        return messages, {"previous_best_code": code, "critique": event["text"]}

    def round_replies(self, round_index: int, messages: list[dict[str, Any]], context: dict[str, Any]) -> list[dict[str, Any]]:
        saved = self.store.read_json(f"rounds/r{round_index}/replies.json")
        if saved is not None:
            return saved
        if round_index == 0 and self.config.reward_source == "keypoints":
            replies = [self.keypoint_reply()]
            self.store.write_json(f"rounds/r{round_index}/replies.json", replies)
            return replies
        request = GenerationRequest(
            messages=messages, n=self.config.samples, task_id=self.task.id, round=round_index,
            temperature=self.config.temperature, seed=self.config.seed, context=context,
        )
        replies = [r.to_dict() for r in self.backend.generate(request)]
        self.store.write_json(f"rounds/r{round_index}/replies.json", replies)
        return replies

    # --- keypoints (text2reward.keypoints) ------------------------------------------------------------
    def ensure_keypoints(self) -> None:
        """With a keypoint reward source: the task's keypoints in `keypoints/` (found once; a resume reads them)."""
        if self.config.reward_source == "code":
            return
        from text2reward.keypoints.find import find_keypoints

        keypoints = find_keypoints(self.task, self.store.root / KEYPOINTS_DIR, self.config.keypoints,
                                   self.backend if self.config.keypoints == "model" else None, seed=self.config.seed,
                                   camera=self.config.keypoint_camera, say=self.say, anchors=self.config.keypoint_anchors)
        self.say(f"keypoints ({keypoints.source}): " + ", ".join(
            f"{p.name} {tuple(round(v, 3) for v in p.world)}" + (f" on {p.anchor}" if p.anchor else "") for p in keypoints.points))

    def keypoint_code(self) -> str:
        return (self.store.root / KEYPOINTS_DIR / "reward.py").read_text()

    def keypoint_summary(self) -> str:
        from text2reward.keypoints.find import read_keypoints

        keypoints = read_keypoints(self.store.root / KEYPOINTS_DIR)
        assert keypoints is not None  # ensure_keypoints ran first
        lines = [f"- {p.name}: world {[round(v, 3) for v in p.world]} m" + (f", moves with {p.anchor}" if p.anchor else ", fixed")
                 for p in keypoints.points]
        return f"Keypoints from {keypoints.source} (camera {keypoints.camera.name}):\n" + "\n".join(lines)

    def keypoint_reply(self) -> dict[str, Any]:
        """Round 0 of `--reward-source keypoints`: one reply holding the keypoint program, said to be written by
        text2reward from the keypoints (never presented as a model's code)."""
        from text2reward.generation.llm.base import Reply
        from text2reward.keypoints.find import read_keypoints

        keypoints = read_keypoints(self.store.root / KEYPOINTS_DIR)
        assert keypoints is not None  # ensure_keypoints ran first
        text = "A reward written by text2reward from the task's keypoints.\n\n```python\n" + self.keypoint_code() + "```\n"
        return Reply(text=text, backend="keypoints", model=f"program from {keypoints.source} keypoints").to_dict()

    def with_keypoint_reward(self, code: str) -> str:
        """`--reward-source code+keypoints`: the model's program plus the keypoint reward, unless it already holds it."""
        from text2reward.keypoints.program import KEYPOINT_FUNCTION, combine

        if f"def {KEYPOINT_FUNCTION}(" in code:
            return code  # a later round edits the combined program it was shown
        return combine(code, self.keypoint_code())

    def analyse_failures(self, round_index: int) -> None:
        """`--vision-analysis`: each trained candidate that failed shows its keyframes to the vision model with
        "what went wrong?"; the answer is kept beside it and joins the feedback when it is the one shown next.
        A failing endpoint costs only the analysis, never the round."""
        if not self.config.vision_analysis:
            return
        from text2reward.feedback import failure_messages

        for candidate in self.store.candidates(round_index):
            if not has_training(candidate) or candidate.get("vision_analysis") or not candidate.get("keyframes"):
                continue
            if candidate["training"]["success_rate"] >= self.config.success_threshold:
                continue
            code = self.store.root.joinpath(candidate["code_file"]).read_text()
            messages = failure_messages(self.task, code, candidate.get("behaviour_text", ""),
                                        candidate["training"]["success_rate"], len(candidate["keyframes"]))
            images = [str(self.store.root / k) for k in candidate["keyframes"]]
            try:
                reply = self.backend.generate(GenerationRequest(
                    messages=messages, n=1, task_id=self.task.id, round=round_index, temperature=0.0, seed=self.config.seed,
                    context={"images": images, "vision_analysis": candidate["id"]}))[0]
            except BackendError as exc:
                self.say(f"{candidate['id']}: vision analysis failed ({str(exc)[:120]}); the feedback goes on without it")
                continue
            if reply.text is None:
                self.say(f"{candidate['id']}: vision analysis got no answer ({reply.error}); the feedback goes on without it")
                continue
            directory = self.store.candidate_dir(round_index, candidate["sample"])
            path = self.store.write_text(directory / "vision_analysis.md", reply.text)
            candidate["vision_analysis"] = {"file": self.store.relative(path), "images": list(candidate["keyframes"]),
                                            "model": f"{reply.backend}:{reply.model}"}
            self.store.write_candidate(candidate)
            self.say(f"{candidate['id']}: a vision model looked at its rollout")

    # --- one candidate before training -----------------------------------------------------------------
    def prepare_candidate(self, round_index: int, sample: int, reply: dict[str, Any], messages: list[dict[str, Any]]) -> Candidate:
        """Extract, validate and screen one reply, asking for fixes; whatever goes wrong is this candidate's
        alone: it ends `no_code`, `invalid`, `screened_out` or `failed` with the reason, and the round goes on.
        Only a backend that cannot serve any request (or a run waiting for a person's replies) stops the run."""
        existing = self.store.read_candidate(round_index, sample)
        if existing is not None:
            return existing
        candidate: Candidate = {
            "id": f"r{round_index}-s{sample}", "round": round_index, "sample": sample,
            "backend": reply["backend"], "model": reply["model"], "rule_based": reply.get("rule_based", False),
            "tokens": {"prompt": reply.get("prompt_tokens", 0), "completion": reply.get("completion_tokens", 0)},
            "attempts": [],
        }
        try:
            return self.check_and_fix(candidate, reply)
        except BackendError:
            raise
        except Exception as exc:  # a bug or a broken environment: this candidate fails, the round goes on
            reason = str(exc) if isinstance(exc, Text2RewardError) else f"{type(exc).__name__}: {exc}"
            self.say(f"{candidate['id']}: failed before training: {shorten(reason.splitlines()[0], 200) if reason else ''}")
            return self.finish_candidate(candidate, "failed", reason)

    def check_and_fix(self, candidate: Candidate, reply: dict[str, Any]) -> Candidate:
        from text2reward.generation import prompting

        round_index, sample = candidate["round"], candidate["sample"]
        text = reply.get("text")
        for attempt in range(self.config.fix_attempts + 1):
            if text is None:
                return self.finish_candidate(candidate, "no_code", f"the backend returned no reply: {reply.get('error')}")
            self.store.write_text(self.store.candidate_dir(round_index, sample) / f"reply_{attempt}.md", text)
            status, error, code = self.check_reply(candidate, attempt, text)
            if status == "pending_training":
                candidate["status"] = status
                return self.store.write_candidate(candidate)
            if attempt == self.config.fix_attempts:
                return self.finish_candidate(candidate, status, error)
            self.say(f"{candidate['id']}: {error.splitlines()[0][:100]} -> asking for a fix")
            fix_messages = prompting.build_error_messages(self.task, code or text, error, self.config.reward_mode)
            fix = self.backend.generate(GenerationRequest(
                messages=fix_messages, n=1, task_id=self.task.id, round=round_index, seed=self.config.seed,
                temperature=self.config.temperature,
                context={"fix_error": error, "sample": sample, "attempt": attempt + 1, "round": round_index,
                         "reward_mode": self.config.reward_mode},
            ))[0]
            candidate["tokens"]["prompt"] += fix.prompt_tokens
            candidate["tokens"]["completion"] += fix.completion_tokens
            self.store.write_json(self.store.candidate_dir(round_index, sample) / f"fix_prompt_{attempt + 1}.json", fix_messages)
            text, reply = fix.text, fix.to_dict()
        raise AssertionError("unreachable: the last attempt returns")

    def check_reply(self, candidate: Candidate, attempt: int, text: str) -> tuple[str, str, str | None]:
        """(status, error, code) of one reply: `pending_training` when it may train, else the status it ends
        with if no fix attempt is left and the error that goes back to the model (the screening comparison
        for a reward that ranks failures above successes, as DESIGN promises)."""
        from text2reward.generation.extraction import extract_code
        from text2reward.sandbox import validate

        directory = self.store.candidate_dir(candidate["round"], candidate["sample"])
        extraction = extract_code(text, self.config.reward_mode)
        if not extraction.ok:
            error = extraction.error or f"the reply contains no {self.config.reward_mode} function"
            candidate["attempts"].append({"attempt": attempt, "errors": [error]})
            return ("invalid" if extraction.function_found else "no_code"), error, extraction.code
        code = extraction.code
        assert code is not None  # an ok extraction holds its code
        if self.config.reward_source == "code+keypoints":
            try:
                code = self.with_keypoint_reward(code)
            except ConfigError as exc:
                candidate["attempts"].append({"attempt": attempt, "errors": [str(exc)]})
                return "invalid", str(exc), code
        code_file = self.store.relative(self.store.write_text(directory / f"reward_{attempt}.py", code))
        report = validate(code, self.task, mode=self.config.reward_mode)
        record: dict[str, Any] = {"attempt": attempt, "code_file": code_file, "validation": report.to_dict()}
        candidate["attempts"].append(record)
        if not report.ok:
            return "invalid", "\n".join(report.errors), code
        candidate["code_file"] = code_file
        candidate["validation"] = report.to_dict()
        if not (self.config.screen and self.task.has_scripted_policy):
            return "pending_training", "", code
        try:
            screening = self.screen(code)
        except RewardProgramError as exc:
            error = f"the reward failed on a recorded rollout while being screened: {exc}"
            record["screening_error"] = error
            return "invalid", error, code
        record["screening"] = candidate["screening"] = screening
        if not screening["passed"]:
            return "screened_out", screening["comparison_text"], code
        return "pending_training", "", code

    def finish_candidate(self, candidate: Candidate, status: str, reason: str) -> Candidate:
        candidate["status"] = status
        candidate["reason"] = reason
        return self.store.write_candidate(candidate)

    def screen(self, code: str) -> dict[str, Any]:
        """Replay the reward over recorded successes and failures; a reward that raises on one of those
        states raises RewardProgramError (its message goes back to the model)."""
        from policies.reward_program import runnable_source
        from text2reward.sandbox import run_reward
        from text2reward.screening import screen_program, screening_trajectories

        trajectories = screening_trajectories(self.task, seed=self.config.seed, cache_dir=self.store.runs_dir / "cache" / "screening")
        if not trajectories.usable:
            return {"passed": True, "skipped": True, "comparison_text": "no successful and failed rollouts to compare; not screened"}

        def run_returns(code: str, samples: list) -> list[float]:
            result = run_reward(runnable_source(code, self.config.reward_mode), samples)
            if result.error:
                raise RewardProgramError(result.error)
            return [total for total, _ in result.outputs]

        return screen_program(self.task, code, trajectories, run_returns, threshold=self.config.screen_threshold,
                              mode=self.config.reward_mode).to_dict()

    # --- training ------------------------------------------------------------------------------------
    def job(self, out_dir: Path, reward: str, code_path: Path | None, seed: int, video: bool, early_stop: bool = False) -> TrainJob:
        return TrainJob(
            train=self.config.train_config(self.task.id, out_dir / TRAIN_DIR, reward, seed, early_stop=early_stop),
            code_path=str(code_path) if code_path else None, task_file=self.config.task_file, video=video,
        )

    def train_round(self, round_index: int) -> None:
        pending = [c for c in self.store.candidates(round_index) if c["status"] in ("pending_training", "interrupted")]
        if not pending:
            return
        jobs = []
        for candidate in pending:
            directory = self.store.candidate_dir(round_index, candidate["sample"])
            jobs.append(self.job(directory / "training", "code", self.store.root / candidate["code_file"], self.config.seed,
                                 self.config.video, early_stop=True))
        by_dir = {job.out_dir: candidate for job, candidate in zip(jobs, pending)}
        self.say(f"round {round_index}: training {len(jobs)} candidate(s) on {min(self.config.workers, len(jobs))} worker(s)")

        def on_done(outcome: JobOutcome) -> None:
            candidate = by_dir[outcome.job.out_dir]
            directory = Path(outcome.job.out_dir)
            if outcome.ok:
                record = outcome.record
                assert record is not None  # an ok outcome carries the worker's done.json
                result = record["result"]
                stopped = result.get("stopped_early") or {}
                candidate.update({
                    "status": "stopped_early" if stopped.get("kind") == "behind" else "trained",
                    "training": training_summary(result),
                    "training_result": {k: result[k] for k in ("curve", "components", "success_rate", "eval_episodes",
                                                               "final_eval_episodes") if k in result},
                    "feedback_file": self.store.relative(directory / "feedback.md") if (directory / "feedback.md").is_file() else None,
                    "behaviour_text": record.get("behaviour_text", ""),
                    "facts": dict(record.get("facts") or {}),
                    "video_file": self.store.relative(directory / "rollout.mp4") if (directory / "rollout.mp4").is_file() else None,
                    "keyframes": [self.store.relative(Path(k)) for k in (record.get("video") or {}).get("keyframes", [])],
                    "warnings": list(record.get("warnings") or []),
                })
                candidate.pop("reason", None)
                candidate.pop("failure_cause", None)
                candidate.pop("failure_numbers", None)
                candidate.pop("stopped_early", None)
                if stopped.get("kind") == "behind":
                    candidate["stopped_early"] = {k: stopped[k] for k in ("rung", "steps", "reason") if k in stopped}
                for warning in candidate["warnings"]:
                    self.say(f"{candidate['id']}: warning: {warning}")
            else:
                assert outcome.reason is not None  # a failed outcome says why
                candidate["status"] = "interrupted" if outcome.interrupted else "failed"
                candidate["reason"] = outcome.reason
                candidate["failure_cause"] = outcome.cause or "error"
                if outcome.numbers:  # the kernel's account of a stopped call: for people, never for the model
                    candidate["failure_numbers"] = outcome.numbers
            self.store.write_candidate(candidate)
            self.say(f"{candidate['id']}: {self.describe(candidate)}")

        stopper = self.early_stopper(round_index) if self.config.early_stop else None
        # a candidate whose reward process the machine stopped or killed was not at fault: it trains once more
        self.run_retrying([(c["id"], job) for c, job in zip(pending, jobs)], ROUND_ATTEMPTS, on_done, stopper, causes=("machine",))

    def early_stopper(self, round_index: int) -> EarlyStopper:
        """The round's early stopping, primed with the curves of its candidates that already trained (a resume)."""
        from policies.hyperparams import load_hyperparams

        eval_freq = self.config.eval_freq or load_hyperparams(self.task.family, None, self.config.overrides).eval_freq
        stopper = EarlyStopper(self.config.steps or self.task.default_steps, eval_freq)
        for candidate in self.store.candidates(round_index):
            if has_training(candidate):
                stopper.observe(candidate["id"], (candidate.get("training_result") or {}).get("curve") or [])
        return stopper

    def run_displayed(self, labelled_jobs: list[tuple[str, TrainJob]], on_done: Callable[[JobOutcome], None] | None = None,
                      early_stopper: EarlyStopper | None = None) -> list[JobOutcome]:
        jobs, names = [job for _, job in labelled_jobs], [label for label, _ in labelled_jobs]
        if self.display is None:
            return self.run_jobs(jobs, on_done=on_done, early_stopper=early_stopper, names=names)
        self.display.start(labelled_jobs)
        try:
            return self.run_jobs(jobs, on_done=on_done, on_poll=self.display.poll, early_stopper=early_stopper, names=names)
        finally:
            self.display.stop()

    def run_jobs(self, jobs: list[TrainJob], **options: Any) -> list[JobOutcome]:
        """The jobs on the run's executor: worker processes here, or Ray tasks (Ray joined or started once per run,
        when jobs first train, and left when the run ends)."""
        if self.config.executor != "ray":
            return run_jobs(jobs, self.config.workers, **options)
        from text2reward.training.ray_pool import ray_session, run_jobs_on_ray

        if not self.ray_open:
            self.say(f"training on Ray: {self.resources.enter_context(ray_session(self.config.ray_address))}")
            self.ray_open = True
        return run_jobs_on_ray(jobs, self.config.workers, address=self.config.ray_address, **options)

    # --- final comparison ------------------------------------------------------------------------------
    def finalize(self) -> FinalSummary:
        best = self.overall_best()
        if best is None:
            summary: FinalSummary = {"best_candidate": None, "reason": "no candidate trained successfully"}
            self.store.write_final_summary(summary)
            return summary
        seeds = [self.config.seed + 1 + i for i in range(self.config.final_seeds)]
        jobs: list[tuple[str, TrainJob]] = []
        code_path = self.store.root / best["code_file"]
        for seed in seeds:  # keyed by candidate: a later, better candidate never reuses these results
            jobs.append(("best", self.job(self.store.root / "final" / best["id"] / f"seed{seed}", "code", code_path, seed, False)))
        if self.config.compare_expert and self.task.has_expert_reward:
            for seed in seeds:
                jobs.append(("expert", self.job(self.store.root / "final" / "expert" / f"seed{seed}", "expert", None, seed, False)))
        for _, job in jobs:
            job.analysis_episodes = 0
        if not jobs:
            summary = {"best_candidate": best["id"], "seeds": seeds, "interrupted": False}
            self.store.write_final_summary(summary)
            return summary
        self.say(f"final: re-training the best reward ({best['id']}) on {len(seeds)} seed(s)"
                 + (" beside the expert reward" if any(k == "expert" for k, _ in jobs) else ""))
        outcomes, attempts = self.run_retrying([(f"final {kind} seed {job.train.seed}", job) for kind, job in jobs], FINAL_ATTEMPTS)
        summary = {"best_candidate": best["id"], "seeds": seeds, "interrupted": any(o.interrupted for o in outcomes)}
        for kind in ("best", "expert"):
            mine = [(job, outcome, tries) for (k, job), outcome, tries in zip(jobs, outcomes, attempts) if k == kind]
            results = [o.record["result"] for _, o, _ in mine if o.ok and o.record is not None]
            failed = [{"seed": job.train.seed, "reason": o.reason or "", "cause": o.cause or "error", "attempts": tries}
                      for job, o, tries in mine if not o.ok]
            if results or failed:
                rates = [r["success_rate"] for r in results]
                mean = sum(rates) / len(rates) if rates else None
                spread = (sum((r - mean) ** 2 for r in rates) / len(rates)) ** 0.5 if rates else None
                summary[kind] = {"success_rates": rates, "seeds": [r["seed"] for r in results], "mean": mean, "std": spread,
                                 "failures": [f["reason"] for f in failed], "failed_seeds": failed,
                                 "curves": [r["curve"] for r in results]}
        self.store.write_final_summary(summary)
        return summary

    def run_retrying(self, labelled_jobs: list[tuple[str, TrainJob]], attempts: int,
                     on_done: Callable[[JobOutcome], None] | None = None, early_stopper: EarlyStopper | None = None,
                     causes: tuple[str, ...] = ("machine", "interrupted", "error")) -> tuple[list[JobOutcome], list[int]]:
        """The jobs, and again (up to `attempts` in all) those that failed for one of `causes`, never the reward's own:
        the machine stopped or killed its process, a worker died, a library failed. A job that trained is never rerun
        (its done.json stands). Returns the last outcome of each job and how many attempts it took."""
        outcomes = self.run_displayed(labelled_jobs, on_done, early_stopper)
        tries = [1] * len(outcomes)
        for _ in range(attempts - 1):
            again = [i for i, outcome in enumerate(outcomes) if outcome.retryable and outcome.cause in causes]
            if not again:
                break
            for i in again:
                self.say(f"{labelled_jobs[i][0]}: trying again ({outcomes[i].cause}: {shorten(outcomes[i].reason or '', 120)})")
            for i, outcome in zip(again, self.run_displayed([labelled_jobs[i] for i in again], on_done, early_stopper)):
                outcomes[i], tries[i] = outcome, tries[i] + 1
        return outcomes, tries


def final_needs_training(final: FinalSummary | None) -> bool:
    """No final comparison yet, or one with seeds still to train (interrupted, or failed: `t2r resume` re-trains those)."""
    if final is None or final.get("interrupted"):
        return True
    return any(isinstance(final.get(kind), dict) and final[kind].get("failures") for kind in ("best", "expert"))


def no_result_reason(candidates: list[Candidate]) -> str:
    """One line: why nothing trained, by what happened to each candidate."""
    if not candidates:
        return "no candidate was produced"
    parts = []
    for candidate in candidates:
        reason = " ".join(str(candidate.get("reason", "")).split())
        parts.append(f"{candidate['id']} {candidate['status']}" + (f" ({shorten(reason, 120)})" if reason else ""))
    return "no candidate trained: " + "; ".join(parts)


def start_run(config: RunConfig, runs_dir: Path, progress: Progress | None = None, backend: Backend | None = None,
              display: JobDisplay | None = None) -> RunStore:
    """Check everything that can be checked, then create the run folder and run it."""
    from text2reward.preflight import budget_warning, check_run_config

    config = check_run_config(config, backend_given=backend is not None)
    require_sandbox()
    warning = budget_warning(get_task(config.task_id), config.steps)
    if warning and progress is not None:
        progress(warning)
    store = RunStore.create(runs_dir, config)
    try:
        loop = Loop(store, backend, progress, display)
    except BaseException as exc:  # a run never stays `running` because its start failed
        store.set_state(status="failed", error=str(exc)[:500])
        index_run(store)
        raise
    loop.run()
    return store


def resume_run(runs_dir: Path, run_id: str, progress: Progress | None = None, backend: Backend | None = None,
               display: JobDisplay | None = None, reply_files: list[str] | None = None) -> RunStore:
    """Go on with a run; `reply_files` adds replies for a run that waits on a person (`--llm file`)."""
    from text2reward.preflight import check_backend, check_executor

    store = RunStore.open(runs_dir, run_id)
    config = store.config()
    check_executor(config)
    if reply_files:
        if config.backend != "file":
            raise ConfigError(f"run {run_id} asks {config.backend}, not reply files: --reply-file is for runs made with --llm file")
        config.reply_files = [*config.reply_files, *reply_files]
    if config.task_file:
        load_task_file(config.task_file)
    if backend is None:
        check_backend(config, get_task(config.task_id))
    require_sandbox()
    if reply_files:
        store.write_json("config.json", asdict(config))
    Loop(store, backend, progress, display).run()
    return store


def require_sandbox() -> None:
    """Fail closed before any model is asked or any code runs: no jail here, no run."""
    from text2reward.sandbox import active_isolation

    active_isolation()
