"""``judge.health``: the shares of judgments per task above which a run's judge is unhealthy (``health.check``
applies them after the run; docs/judge-health.md)."""

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
