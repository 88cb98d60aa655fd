"""``judge.health``: the shares of judgments per task above which a run's judge is unhealthy, the degeneracy limits
and the controls (``health.check`` applies them; docs/judge-health.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["HealthThresholds"]


class HealthThresholds(BaseModel):
    """``judge.health``: above these shares of judgments (per task) the judge is unhealthy."""

    model_config = ConfigDict(extra="forbid")

    max_fallback_rate: float = Field(0.10, ge=0, le=1)
    max_invalid_rate: float = Field(0.10, ge=0, le=1)
    max_echo_rate: float = Field(0.05, ge=0, le=1)
    max_failed_rate: float = Field(0.05, ge=0, le=1)
    min_labelled_share: float = Field(0.75, ge=0, le=1)  # citation: share of cited statements with a parsed label
    max_label_share: float = Field(0.95, gt=0, le=1)  # degenerate: one label takes at least this share ...
    min_labels: int = Field(20, ge=1)  # ... of at least this many labels of a task
    controls: bool = True  # controls in every run (docs/judge-health.md); false: none
    control_pairs: int = Field(5, ge=1, le=50)  # pairs per task
    min_told_apart: float = Field(0.5, gt=0, le=1)  # controls fail when the told-apart share's CI lies below this
    pass_told_apart: float = Field(0.5, gt=0, le=1)  # ... and pass only when its lower bound reaches this; else weak
