"""The ``tracking:`` section of a config (light: pydantic only, no backend import)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TrackingOptions"]


class TrackingOptions(BaseModel):
    """Where a run is logged after its files are written (``eval --track mlflow`` sets ``backend``)."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["mlflow"] = "mlflow"
    experiment: str = Field("open-rag-eval", min_length=1)
    run_name: str | None = None  # None: the results folder's name
    tracking_uri: str | None = None  # None: MLflow's own default (MLFLOW_TRACKING_URI, else its local store)
    tags: dict[str, str] = {}
