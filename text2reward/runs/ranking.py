"""Which candidate is best: one ordering for the loop, the reports, the CLI and the dashboard."""

from __future__ import annotations

from text2reward.runs.records import Candidate, has_training


def candidate_score(candidate: Candidate) -> tuple[float, float, float]:
    """Order trained candidates: final success, then success over the whole curve, then native return."""
    training = candidate.get("training") or {}
    curve = training.get("curve") or [{"success_rate": 0.0}]
    area = sum(p["success_rate"] for p in curve) / len(curve)
    return (training.get("success_rate", -1.0), area, training.get("mean_native_return", float("-inf")))


def best_candidate(candidates: list[Candidate]) -> Candidate | None:
    trained = [c for c in candidates if has_training(c)]
    return max(trained, key=candidate_score) if trained else None
