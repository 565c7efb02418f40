"""Where each of a run's files lives inside its folder: the one place the run-folder layout is spelled.

Why one module: the loop writes these files, and the store, the report, the dashboard and the CLI read them; a path
spelled in each of them drifts (a renamed file is then silently "missing" to one reader). Paths are derived from the
run's folder, never stored, so a moved run still opens.

    runs/<run-id>/
      config.json  state.json  events.json  report.md  pending_prompt.md  curves.png  components.png
      keypoints/                          (keypoint reward sources: text2reward.keypoints.find lists its files)
      rounds/r<R>/prompt.json  replies.json  summary.json
      rounds/r<R>/s<S>/candidate.json  reply_<A>.md  reward_<A>.py  fix_prompt_<A>.json  vision_analysis.md
      rounds/r<R>/s<S>/training/          (the candidate's training job: job.json, done.json, train/, rollout.mp4 ...)
      rounds/r<R>/s<S>/training-seed<N>/  (with --candidate-seeds S > 1: the job of each seed after the first)
      final/summary.json  final/<candidate>/seed<N>/  final/expert/seed<N>/
      tune/<candidate>/                    (its study, trials, and the tuned candidate's candidate.json)
    runs/index.sqlite  runs/cache/         (beside the runs: the index, and the reply and screening caches)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CONFIG = "config.json"
STATE = "state.json"
EVENTS = "events.json"
REPORT = "report.md"
PENDING_PROMPT = "pending_prompt.md"
"""Where a run driven by reply files writes the prompt it waits on (`t2r prompt --run RUN` prints it)."""
CANDIDATE = "candidate.json"
FINAL_SUMMARY = "final/summary.json"
KEYPOINTS = "keypoints"
TUNE = "tune"
TRAINING = "training"
"""In a candidate's folder: its training job's folder."""
INDEX = "index.sqlite"
CACHE = "cache"

ROUND_PROMPTS = "rounds/r*/prompt.json"
ROUND_SUMMARIES = "rounds/r*/summary.json"
ROUND_REPLIES = "rounds/r*/replies.json"
CANDIDATES = f"rounds/r*/s*/{CANDIDATE}"
TUNED_CANDIDATES = f"{TUNE}/*/{CANDIDATE}"
FIX_PROMPTS = "rounds/r*/s*/fix_prompt_*.json"
RECORD_FILES = (STATE, EVENTS, CONFIG, FINAL_SUMMARY, ROUND_PROMPTS, ROUND_SUMMARIES, CANDIDATES, TUNED_CANDIDATES)
"""Every record a run's view is built from (the dashboard re-renders when one of them changes)."""


def round_index(folder: Path) -> int | None:
    """The R of a `rounds/r<R>` folder; None for anything else."""
    digits = folder.name[1:]
    return int(digits) if folder.name.startswith("r") and digits.isdigit() else None


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run's files, relative to its folder (`relative`) or absolute (the properties' own)."""

    root: Path

    # --- the run ---
    @property
    def config(self) -> Path:
        return self.root / CONFIG

    @property
    def state(self) -> Path:
        return self.root / STATE

    @property
    def events(self) -> Path:
        return self.root / EVENTS

    @property
    def report(self) -> Path:
        return self.root / REPORT

    @property
    def keypoints(self) -> Path:
        return self.root / KEYPOINTS

    @property
    def curves_plot(self) -> Path:
        return self.root / "curves.png"

    @property
    def components_plot(self) -> Path:
        return self.root / "components.png"

    @property
    def cache(self) -> Path:
        return self.root.parent / CACHE

    # --- rounds ---
    def round_dir(self, round_index: int) -> Path:
        return self.root / "rounds" / f"r{round_index}"

    def round_prompt(self, round_index: int) -> Path:
        return self.round_dir(round_index) / "prompt.json"

    def round_replies(self, round_index: int) -> Path:
        return self.round_dir(round_index) / "replies.json"

    def round_summary(self, round_index: int) -> Path:
        return self.round_dir(round_index) / "summary.json"

    def rounds_with_prompts(self) -> list[int]:
        """The rounds whose prompt was written, in order."""
        return sorted(r for r in (round_index(p.parent) for p in self.root.glob(ROUND_PROMPTS)) if r is not None)

    # --- candidates ---
    def candidate_dir(self, round_index: int, sample: int) -> Path:
        return self.round_dir(round_index) / f"s{sample}"

    def candidate_file(self, round_index: int, sample: int) -> Path:
        return self.candidate_dir(round_index, sample) / CANDIDATE

    def reply(self, round_index: int, sample: int, attempt: int) -> Path:
        return self.candidate_dir(round_index, sample) / f"reply_{attempt}.md"

    def reward_code(self, round_index: int, sample: int, attempt: int) -> Path:
        return self.candidate_dir(round_index, sample) / f"reward_{attempt}.py"

    def fix_prompt(self, round_index: int, sample: int, attempt: int) -> Path:
        return self.candidate_dir(round_index, sample) / f"fix_prompt_{attempt}.json"

    def vision_answer(self, round_index: int, sample: int) -> Path:
        return self.candidate_dir(round_index, sample) / "vision_analysis.md"

    def training_dir(self, round_index: int, sample: int, seed: int | None = None) -> Path:
        """A round candidate's training job folder: its first seed's (`seed` None), or another seed's (`--candidate-seeds`
        S > 1: `training-seed<N>/` beside it, so a one-seed candidate and older runs keep `training/` as it was)."""
        folder = TRAINING if seed is None else f"{TRAINING}-seed{seed}"
        return self.candidate_dir(round_index, sample) / folder

    # --- the final comparison and tuning ---
    @property
    def final_summary(self) -> Path:
        return self.root / FINAL_SUMMARY

    def final_job(self, arm: str, seed: int) -> Path:
        """`arm` is the best candidate's id (so a later, better candidate never reuses these results) or "expert"."""
        return self.root / "final" / arm / f"seed{seed}"

    def tune_dir(self, candidate_id: str) -> Path:
        """Where tuning candidate `candidate_id` writes: its study, its trials, and the tuned candidate."""
        return self.root / TUNE / candidate_id

    def tuned_candidate_file(self, parent_id: str) -> Path:
        return self.tune_dir(parent_id) / CANDIDATE

    def relative(self, path: Path) -> str:
        return str(Path(path).relative_to(self.root))
