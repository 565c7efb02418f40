"""The synthesis loop: prompt -> K replies -> extract -> validate (fix) -> screen -> train in parallel
-> evaluate -> keep the best -> feedback -> next round; then re-train the best over seeds beside the
expert reward.

Every stage writes its artefact atomically before the next begins, and every stage first looks for its
artefact: so `resume` is the same function as `run`, and an interrupted run redoes only unfinished work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from sim_envs import get_task, load_task_file
from sim_envs.task import Task
from text2reward.generation.llm.base import Backend, GenerationRequest
from text2reward.runs.ranking import best_candidate
from text2reward.runs.records import Candidate, FinalSummary, RoundSummary
from text2reward.runs.store import RunConfig, RunStore, index_run
from text2reward.training.job import TRAIN_DIR, TrainJob
from text2reward.training.pool import JobOutcome, run_jobs

Progress = Callable[[str], None]


class JobDisplay(Protocol):
    """Shows training jobs while they run (the CLI draws progress bars; tests pass none)."""

    def start(self, labelled_jobs: list[tuple[str, TrainJob]]) -> None: ...

    def poll(self) -> None: ...

    def stop(self) -> None: ...


def replies_used(store: RunStore) -> int:
    """How many replies the run has already consumed: saved rounds plus fix requests."""
    rounds = sum(len(store.read_json(p.relative_to(store.root)) or []) for p in store.root.glob("rounds/r*/replies.json"))
    return rounds + len(list(store.root.glob("rounds/r*/s*/fix_prompt_*.json")))


def make_run_backend(config: RunConfig, store: RunStore) -> Backend:
    from text2reward.generation.llm import make_backend
    from text2reward.generation.llm.cache import CachedBackend, ReplyCache

    options: dict[str, Any] = {}
    if config.backend == "openai":
        options = {"model": config.model, "base_url": config.base_url, "vision": config.vision}
    elif config.backend == "file":
        options = {"paths": config.reply_files or None}
        if config.reply_files:
            options["start"] = replies_used(store)
    elif config.backend == "heuristic":
        options = {"seed": config.seed}
    backend = make_backend(config.backend, **options)
    if config.backend == "file":
        return backend  # pasted replies are the record themselves
    return CachedBackend(backend, ReplyCache(store.runs_dir / "cache"))


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

    # --- top level -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        state = self.store.set_state(status="running", created=self.store.state().get("created", time.time()))
        index_run(self.store)
        try:
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
            final = self.store.final_summary()
            if redone or final is None or final.get("interrupted"):
                final = self.finalize()
            from text2reward.runs.report import write_report

            report = write_report(self.store)
            elapsed = state.get("wall_seconds", 0.0) + time.perf_counter() - started
            interrupted = [c["id"] for c in self.store.candidates() if c["status"] == "interrupted"]
            status = "incomplete" if interrupted or final.get("interrupted") else "finished"
            if status == "incomplete":
                self.say(f"some training was interrupted ({', '.join(interrupted) or 'final comparison'}): "
                         f"`t2r resume {self.store.run_id}` finishes it")
            self.store.set_state(status=status, wall_seconds=round(elapsed, 1), report=self.store.relative(report))
            return final
        except BaseException as exc:
            elapsed = self.store.state().get("wall_seconds", 0.0) + time.perf_counter() - started
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            self.store.set_state(status=status, error=str(exc)[:500], wall_seconds=round(elapsed, 1))
            raise
        finally:
            index_run(self.store)

    def overall_best(self) -> Candidate | None:
        return best_candidate(self.store.candidates())

    # --- one round -------------------------------------------------------------------------------
    def run_round(self, round_index: int) -> RoundSummary:
        self.say(f"round {round_index}: asking {self.backend_label()} for {self.config.samples} reward(s)")
        messages, context = self.round_prompt(round_index)
        replies = self.round_replies(round_index, messages, context)
        for sample, reply in enumerate(replies):
            self.prepare_candidate(round_index, sample, reply, messages)
        self.train_round(round_index)
        candidates = self.store.candidates(round_index)
        best = best_candidate(candidates)
        summary: RoundSummary = {
            "round": round_index,
            "best": best and best["id"],
            "best_success": best and best["training"]["success_rate"],
            "statuses": {c["id"]: c["status"] for c in candidates},
        }
        self.store.write_round_summary(summary)
        self.say(f"round {round_index}: " + ", ".join(f"{c['id']} {self.describe(c)}" for c in candidates))
        return summary

    def backend_label(self) -> str:
        if getattr(self.backend, "rule_based", False) or self.config.backend == "heuristic":
            return "the rule-based heuristic backend (no language model)"
        return f"{self.config.backend}:{self.config.model or ''}".rstrip(":")

    @staticmethod
    def describe(candidate: dict[str, Any]) -> str:
        if candidate["status"] == "trained":
            return f"success {candidate['training']['success_rate']:.2f}"
        return f"{candidate['status']} ({candidate.get('reason', '')[:80]})"

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
            messages = prompting.build_initial_messages(self.task, few_shot=self.config.few_shot)
        else:
            from text2reward.feedback import component_stats

            code = self.store.root.joinpath(best["code_file"]).read_text()
            feedback = self.store.root.joinpath(best["feedback_file"]).read_text() if best.get("feedback_file") else ""
            messages = prompting.build_feedback_messages(self.task, code, feedback)
            context = {
                "previous_best_code": code,
                "component_stats": component_stats(best["training_result"]),
                "success_rate": best["training"]["success_rate"],
            }
        shown = self.shown_candidate(human[-1] if human else None, best)
        if self.config.vision and shown and shown.get("keyframes"):
            # a vision-capable model sees what the robot did (the backend attaches these to the prompt)
            context["images"] = [str(self.store.root / k) for k in shown["keyframes"]]
        context["round"] = round_index
        self.store.write_json(f"rounds/r{round_index}/prompt.json", {"messages": messages, "context": context})
        return messages, context

    def shown_candidate(self, event: dict[str, Any] | None, best: Candidate | None) -> Candidate | None:
        """The candidate whose rollout the next prompt talks about."""
        if event is None:
            return best
        return self.store.candidate(event.get("candidate") or event.get("best"))

    def human_prompt(self, event: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        from text2reward.generation import prompting

        def load(candidate_id: str) -> tuple[dict[str, Any], str, str]:
            candidate = self.store.candidate(candidate_id)
            code = self.store.root.joinpath(candidate["code_file"]).read_text()
            return candidate, code, candidate.get("behaviour_text", "")

        if event["type"] == "preference":
            _, best_code, best_text = load(event["best"])
            _, worst_code, worst_text = load(event["worst"])
            messages = prompting.build_preference_messages(self.task, best_code, worst_code, best_text, worst_text, event.get("text"))
            return messages, {"previous_best_code": best_code, "critique": event.get("text") or ""}
        _, code, behaviour = load(event["candidate"])
        messages = prompting.build_human_feedback_messages(self.task, code, behaviour, event["text"])
        return messages, {"previous_best_code": code, "critique": event["text"]}

    def round_replies(self, round_index: int, messages: list[dict[str, Any]], context: dict[str, Any]) -> list[dict[str, Any]]:
        saved = self.store.read_json(f"rounds/r{round_index}/replies.json")
        if saved is not None:
            return saved
        request = GenerationRequest(
            messages=messages, n=self.config.samples, task_id=self.task.id, round=round_index,
            temperature=self.config.temperature, context=context,
        )
        replies = [r.to_dict() for r in self.backend.generate(request)]
        self.store.write_json(f"rounds/r{round_index}/replies.json", replies)
        return replies

    # --- one candidate before training -----------------------------------------------------------------
    def prepare_candidate(self, round_index: int, sample: int, reply: dict[str, Any], messages: list[dict[str, Any]]) -> Candidate:
        from text2reward.generation import prompting
        from text2reward.generation.extraction import extract_code
        from text2reward.sandbox import validate

        directory = self.store.candidate_dir(round_index, sample)
        existing = self.store.read_candidate(round_index, sample)
        if existing is not None:
            return existing
        candidate: Candidate = {
            "id": f"r{round_index}-s{sample}", "round": round_index, "sample": sample,
            "backend": reply["backend"], "model": reply["model"], "rule_based": reply.get("rule_based", False),
            "tokens": {"prompt": reply.get("prompt_tokens", 0), "completion": reply.get("completion_tokens", 0)},
            "attempts": [],
        }
        text, attempt_messages = reply.get("text"), messages
        for attempt in range(self.config.fix_attempts + 1):
            if text is None:
                return self.finish_candidate(candidate, "no_code", f"the backend returned no reply: {reply.get('error')}")
            self.store.write_text(directory / f"reply_{attempt}.md", text)
            extraction = extract_code(text)
            if not extraction.ok:
                error = extraction.error or "the reply contains no compute_dense_reward(self, action)"
                candidate["attempts"].append({"attempt": attempt, "errors": [error]})
            else:
                code_file = self.store.write_text(directory / f"reward_{attempt}.py", extraction.code)
                report = validate(extraction.code, self.task)
                candidate["attempts"].append({"attempt": attempt, "code_file": self.store.relative(code_file), "validation": report.to_dict()})
                if report.ok:
                    candidate.update(code_file=self.store.relative(code_file), validation=report.to_dict())
                    break
                error = "\n".join(report.errors)
            if attempt == self.config.fix_attempts:
                status = "invalid" if extraction.function_found else "no_code"
                return self.finish_candidate(candidate, status, error)
            self.say(f"{candidate['id']}: {error.splitlines()[0][:100]} -> asking for a fix")
            attempt_messages = prompting.build_error_messages(self.task, extraction.code or text, error)
            fix = self.backend.generate(GenerationRequest(
                messages=attempt_messages, n=1, task_id=self.task.id, round=round_index,
                temperature=self.config.temperature, context={"fix_error": error, "sample": sample, "attempt": attempt + 1, "round": round_index},
            ))[0]
            candidate["tokens"]["prompt"] += fix.prompt_tokens
            candidate["tokens"]["completion"] += fix.completion_tokens
            self.store.write_json(directory / f"fix_prompt_{attempt + 1}.json", attempt_messages)
            text, reply = fix.text, fix.to_dict()
        if self.config.screen and self.task.has_scripted_policy:
            screening = self.screen(candidate)
            candidate["screening"] = screening
            if not screening["passed"]:
                return self.finish_candidate(candidate, "screened_out", screening["comparison_text"])
        candidate["status"] = "pending_training"
        return self.store.write_candidate(candidate)

    def finish_candidate(self, candidate: Candidate, status: str, reason: str) -> Candidate:
        candidate.update(status=status, reason=reason)
        return self.store.write_candidate(candidate)

    def screen(self, candidate: Candidate) -> dict[str, Any]:
        from text2reward.sandbox import run_reward
        from text2reward.screening import screen_program, screening_trajectories

        trajectories = screening_trajectories(self.task, seed=self.config.seed, cache_dir=self.store.runs_dir / "cache" / "screening")
        if not trajectories.usable:
            return {"passed": True, "skipped": True, "comparison_text": "no successful and failed rollouts to compare; not screened"}
        code = self.store.root.joinpath(candidate["code_file"]).read_text()

        def run_returns(code: str, samples: list) -> list[float]:
            result = run_reward(code, samples)
            if result.error:
                raise RuntimeError(result.error)
            return [total for total, _ in result.outputs]

        result = screen_program(self.task, code, trajectories, run_returns, threshold=self.config.screen_threshold)
        return result.to_dict() if hasattr(result, "to_dict") else asdict(result)

    # --- training ------------------------------------------------------------------------------------
    def job(self, out_dir: Path, reward: str, code_path: Path | None, seed: int, video: bool) -> TrainJob:
        return TrainJob(
            train=self.config.train_config(self.task.id, out_dir / TRAIN_DIR, reward, seed),
            code_path=str(code_path) if code_path else None, task_file=self.config.task_file, video=video,
        )

    def train_round(self, round_index: int) -> None:
        pending = [c for c in self.store.candidates(round_index) if c["status"] in ("pending_training", "interrupted")]
        if not pending:
            return
        jobs = []
        for candidate in pending:
            directory = self.store.candidate_dir(round_index, candidate["sample"])
            jobs.append(self.job(directory / "training", "code", self.store.root / candidate["code_file"], self.config.seed, self.config.video))
        by_dir = {job.out_dir: candidate for job, candidate in zip(jobs, pending)}
        self.say(f"round {round_index}: training {len(jobs)} candidate(s) on {min(self.config.workers, len(jobs))} worker(s)")

        def on_done(outcome: JobOutcome) -> None:
            candidate = by_dir[outcome.job.out_dir]
            directory = Path(outcome.job.out_dir)
            if outcome.ok:
                result = outcome.record["result"]
                candidate.update(
                    status="trained",
                    training={k: result[k] for k in ("success_rate", "best_success_rate", "mean_return", "mean_native_return", "steps", "wall_seconds", "steps_per_second", "curve")},
                    training_result={k: result[k] for k in ("curve", "components", "success_rate")},
                    feedback_file=self.store.relative(directory / "feedback.md") if (directory / "feedback.md").is_file() else None,
                    behaviour_text=outcome.record.get("behaviour_text", ""),
                    video_file=self.store.relative(directory / "rollout.mp4") if (directory / "rollout.mp4").is_file() else None,
                    keyframes=[self.store.relative(Path(k)) for k in (outcome.record.get("video") or {}).get("keyframes", [])],
                )
                candidate.pop("reason", None)
            else:
                candidate.update(status="interrupted" if outcome.interrupted else "failed", reason=outcome.reason)
            self.store.write_candidate(candidate)
            self.say(f"{candidate['id']}: {self.describe(candidate)}")

        self.run_displayed([(c["id"], job) for c, job in zip(pending, jobs)], on_done)

    def run_displayed(self, labelled_jobs: list[tuple[str, TrainJob]], on_done: Callable[[JobOutcome], None] | None = None) -> list[JobOutcome]:
        if self.display is None:
            return run_jobs([job for _, job in labelled_jobs], self.config.workers, on_done=on_done)
        self.display.start(labelled_jobs)
        try:
            return run_jobs([job for _, job in labelled_jobs], self.config.workers, on_done=on_done, on_poll=self.display.poll)
        finally:
            self.display.stop()

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
            summary = {"best_candidate": best["id"], "seeds": [], "interrupted": False}
            self.store.write_final_summary(summary)
            return summary
        self.say(f"final: re-training the best reward ({best['id']}) on {len(seeds)} seed(s)"
                 + (" beside the expert reward" if any(k == "expert" for k, _ in jobs) else ""))
        outcomes = self.run_displayed([(f"final {kind} seed {job.train.seed}", job) for kind, job in jobs])
        summary = {"best_candidate": best["id"], "seeds": seeds, "interrupted": any(o.interrupted for o in outcomes)}
        for kind in ("best", "expert"):
            results = [o.record["result"] for (k, _), o in zip(jobs, outcomes) if k == kind and o.ok]
            failures = [o.reason for (k, _), o in zip(jobs, outcomes) if k == kind and not o.ok]
            if results or failures:
                rates = [r["success_rate"] for r in results]
                mean = sum(rates) / len(rates) if rates else None
                spread = (sum((r - mean) ** 2 for r in rates) / len(rates)) ** 0.5 if rates else None
                summary[kind] = {"success_rates": rates, "mean": mean, "std": spread, "failures": failures,
                                 "curves": [r["curve"] for r in results]}
        self.store.write_final_summary(summary)
        return summary


def start_run(config: RunConfig, runs_dir: Path, progress: Progress | None = None, backend: Backend | None = None,
              display: JobDisplay | None = None) -> RunStore:
    config.validate()
    if config.task_file:
        load_task_file(config.task_file)
    get_task(config.task_id)  # fail before creating the run directory
    require_sandbox()
    store = RunStore.create(runs_dir, config)
    Loop(store, backend, progress, display).run()
    return store


def resume_run(runs_dir: Path, run_id: str, progress: Progress | None = None, backend: Backend | None = None,
               display: JobDisplay | None = None) -> RunStore:
    store = RunStore.open(runs_dir, run_id)
    require_sandbox()
    Loop(store, backend, progress, display).run()
    return store


def require_sandbox() -> None:
    """Fail closed before any model is asked or any code runs: no jail here, no run."""
    from text2reward.sandbox import active_isolation

    active_isolation()
