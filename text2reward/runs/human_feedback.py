"""Human feedback on a run: a critique of one candidate, or a best/worst choice among a round's.

Why one function for the CLI and the dashboard: both must store the same event (who, when, what,
which round it produces) and extend the run by one round that the loop prompts from that event.
"""

from __future__ import annotations

import getpass
from dataclasses import replace

from sim_envs.errors import ConfigError
from text2reward.runs.records import Candidate, FeedbackEvent
from text2reward.runs.statuses import RunStatus
from text2reward.runs.store import RunStore

MAX_TEXT = 4000


def _candidate(store: RunStore, candidate_id: str) -> Candidate:
    record = store.candidate(candidate_id)
    if record is None:
        raise ConfigError(f"run {store.run_id} has no candidate {candidate_id!r}; ids look like r0-s1 (see `t2r runs show {store.run_id}`)")
    if not record.has_training:
        raise ConfigError(f"candidate {candidate_id} was not trained ({record.status.value}); give feedback on a trained candidate")
    return record


def _clean_text(text: str | None, required: bool) -> str:
    text = (text or "").strip()
    if required and not text:
        raise ConfigError("the critique is empty; say what the robot did wrong, e.g. 'it pushes the block past the goal'")
    if len(text) > MAX_TEXT:
        raise ConfigError(f"the critique is {len(text)} characters; keep it under {MAX_TEXT}")
    return text


def submit_feedback(
    store: RunStore,
    *,
    candidate: str | None = None,
    text: str | None = None,
    best: str | None = None,
    worst: str | None = None,
    author: str | None = None,
    source: str = "cli",
) -> FeedbackEvent:
    """Record the event and add the round it will produce; `t2r resume` (or the dashboard) runs it."""
    if store.status().live:
        raise ConfigError(f"run {store.run_id} is still running; give feedback when it has finished "
                          f"(if its process was killed, `t2r resume {store.run_id} --runs-dir {store.runs_dir}` finishes it first)")
    if best or worst:
        if not (best and worst) or best == worst:
            raise ConfigError("a preference needs two different trained candidates, one best and one worst (e.g. best r0-s0, worst r0-s1)")
        _candidate(store, best), _candidate(store, worst)
        event = FeedbackEvent(type="preference", for_round=-1, best=best, worst=worst, text=_clean_text(text, required=False))
    elif candidate:
        _candidate(store, candidate)
        event = FeedbackEvent(type="critique", for_round=-1, candidate=candidate, text=_clean_text(text, required=True))
    else:
        raise ConfigError("say what the feedback is on: a candidate with a critique, or a best and a worst candidate")
    next_round = max([c.round for c in store.candidates()] + [-1]) + 1
    pending = [e for e in store.events() if e.for_round >= next_round]
    if pending:
        raise ConfigError(f"feedback for round {next_round} is already waiting; run `t2r resume {store.run_id} --runs-dir {store.runs_dir}` first")
    stored = store.add_event(replace(event, for_round=next_round, author=author or getpass.getuser(), source=source))
    config = store.config_data()
    if int(config.get("rounds", 1)) < next_round + 1:  # the round this feedback produces is one more round of the run
        store.write_config({**config, "rounds": next_round + 1})
    store.set_state(status=RunStatus.FEEDBACK_PENDING)
    return stored
