"""A round's candidates before training: each reply's code extracted, validated in the jail and screened on scripted
rollouts; a rejected reply goes back to the model with its error, `fix_attempts` times.

Why one stage for the three checks: they share the fix loop (whichever check rejects a reply, its error is what the
model sees next) and the rule that a candidate's failure is its own (it ends `no_code`, `invalid`, `screened_out` or
`failed` with the reason, and the round goes on). Only a backend that cannot serve any request stops the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from policies.reward_program import runnable_source
from sim_envs.task import Task
from text2reward.errors import ConfigError, RewardProgramError, Text2RewardError
from text2reward.generation import prompting
from text2reward.generation.extraction import extract_code
from text2reward.generation.llm.base import Backend, GenerationRequest, Reply
from text2reward.generation.llm.errors import BackendError
from text2reward.runs.records import Attempt, Candidate, PromptContext, Tokens, Validation, read, write
from text2reward.runs.run_events import CandidateChecked, Emit, FixRequested
from text2reward.runs.statuses import CandidateStatus
from text2reward.runs.store import RunStore
from text2reward.sandbox import run_reward, validate
from text2reward.screening import screen_program, screening_trajectories


@dataclass(frozen=True)
class CheckSettings:
    """What the checks take from the run's settings."""

    reward_mode: str
    fix_attempts: int
    temperature: float
    seed: int
    screen: bool
    screen_threshold: float


@dataclass(frozen=True)
class Verdict:
    """One reply's outcome: `pending_training` when it may train, else the status it ends with if no fix attempt is
    left, and the error that goes back to the model."""

    status: CandidateStatus
    error: str = ""
    code: str | None = None


class CandidateChecker:
    """The checks of one run's candidates. `prepare_code` turns extracted code into the program that trains (e.g. the
    keypoint reward added to it); its ConfigError rejects the reply."""

    def __init__(self, store: RunStore, task: Task, backend: Backend, settings: CheckSettings, emit: Emit,
                 prepare_code: Callable[[str], str] | None = None):
        self.store, self.task, self.backend, self.settings, self.emit = store, task, backend, settings, emit
        self.prepare_code = prepare_code

    def prepare(self, round_index: int, sample: int, reply: Reply) -> Candidate:
        """The candidate of one reply: read back when already checked, else checked (and fixed) and recorded."""
        existing = self.store.read_candidate(round_index, sample)
        if existing is not None:
            return existing
        candidate = Candidate(id=f"r{round_index}-s{sample}", round=round_index, sample=sample, backend=reply.backend,
                              model=reply.model, rule_based=reply.rule_based,
                              tokens=Tokens(reply.prompt_tokens, reply.completion_tokens))
        try:
            candidate = self.check_and_fix(candidate, reply)
        except BackendError:
            raise
        except Exception as exc:  # a bug or a broken environment: this candidate fails, the round goes on
            reason = str(exc) if isinstance(exc, Text2RewardError) else f"{type(exc).__name__}: {exc}"
            candidate = self.store.write_candidate(candidate.finish(CandidateStatus.FAILED, reason))
        self.emit(CandidateChecked(candidate))
        return candidate

    def check_and_fix(self, candidate: Candidate, reply: Reply) -> Candidate:
        text = reply.text
        for attempt in range(self.settings.fix_attempts + 1):
            if text is None:
                return self.store.write_candidate(candidate.finish(CandidateStatus.NO_CODE, f"the backend returned no reply: {reply.error}"))
            self.store.write_text(self.store.paths.reply(candidate.round, candidate.sample, attempt), text)
            verdict = self.check_reply(candidate, attempt, text)
            if verdict.status == CandidateStatus.PENDING_TRAINING:
                candidate.status = verdict.status
                return self.store.write_candidate(candidate)
            if attempt == self.settings.fix_attempts:
                return self.store.write_candidate(candidate.finish(verdict.status, verdict.error))
            reply = self.ask_for_fix(candidate, attempt, verdict.code or text, verdict.error)
            text = reply.text
        raise AssertionError("unreachable: the last attempt returns")

    def ask_for_fix(self, candidate: Candidate, attempt: int, code: str, error: str) -> Reply:
        self.emit(FixRequested(candidate.id, error))
        messages = prompting.build_error_messages(self.task, code, error, self.settings.reward_mode)
        fix = self.backend.generate(GenerationRequest(
            messages=messages, n=1, task_id=self.task.id, round=candidate.round, seed=self.settings.seed,
            temperature=self.settings.temperature,
            context=PromptContext(fix_error=error, sample=candidate.sample, attempt=attempt + 1, round=candidate.round,
                                  reward_mode=self.settings.reward_mode),
        ))[0]
        candidate.tokens.prompt += fix.prompt_tokens
        candidate.tokens.completion += fix.completion_tokens
        self.store.write_json(self.store.paths.fix_prompt(candidate.round, candidate.sample, attempt + 1), messages)
        return fix

    def check_reply(self, candidate: Candidate, attempt: int, text: str) -> Verdict:
        """Extract, validate, screen: the first check that rejects the reply gives the verdict (the screening
        comparison for a reward that ranks failures above successes, as the design promises)."""
        mode = self.settings.reward_mode
        extraction = extract_code(text, mode)
        if not extraction.ok or extraction.code is None:
            error = extraction.error or f"the reply contains no {mode} function"
            candidate.attempts.append(Attempt(attempt=attempt, errors=[error]))
            status = CandidateStatus.INVALID if extraction.function_found else CandidateStatus.NO_CODE
            return Verdict(status, error, extraction.code)
        code = extraction.code
        if self.prepare_code is not None:
            try:
                code = self.prepare_code(code)
            except ConfigError as exc:
                candidate.attempts.append(Attempt(attempt=attempt, errors=[str(exc)]))
                return Verdict(CandidateStatus.INVALID, str(exc), code)
        path = self.store.write_text(self.store.paths.reward_code(candidate.round, candidate.sample, attempt), code)
        code_file = self.store.relative(path)
        report = validate(code, self.task, mode=mode)
        validation = read(Validation, write(report), "a validation report")
        record = Attempt(attempt=attempt, code_file=code_file, validation=validation)
        candidate.attempts.append(record)
        if not report.ok:
            return Verdict(CandidateStatus.INVALID, "\n".join(report.errors), code)
        candidate.code_file, candidate.validation = code_file, validation
        if not (self.settings.screen and self.task.has_scripted_policy):
            return Verdict(CandidateStatus.PENDING_TRAINING, "", code)
        try:
            screening = self.screen(code)
        except RewardProgramError as exc:
            error = f"the reward failed on a recorded rollout while being screened: {exc}"
            record.screening_error = error
            return Verdict(CandidateStatus.INVALID, error, code)
        record.screening = candidate.screening = screening
        if not screening["passed"]:
            return Verdict(CandidateStatus.SCREENED_OUT, screening["comparison_text"], code)
        return Verdict(CandidateStatus.PENDING_TRAINING, "", code)

    def screen(self, code: str) -> dict[str, Any]:
        """Replay the reward over recorded successes and failures; a reward that raises on one of those states raises
        RewardProgramError (its message goes back to the model)."""
        trajectories = screening_trajectories(self.task, seed=self.settings.seed, cache_dir=self.store.paths.cache / "screening")
        if not trajectories.usable:
            return {"passed": True, "skipped": True, "comparison_text": "no successful and failed rollouts to compare; not screened"}
        mode = self.settings.reward_mode

        def run_returns(program: str, samples: list) -> list[float]:
            result = run_reward(runnable_source(program, mode), samples)
            if result.error:
                raise RewardProgramError(result.error)
            return [total for total, _ in result.outputs]

        return write(screen_program(self.task, code, trajectories, run_returns, threshold=self.settings.screen_threshold,
                              mode=mode))
