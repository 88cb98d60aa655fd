"""The ``tracking:`` section of a config (light: pydantic only, no backend import)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from open_rag_eval.core.sections import register_section

__all__ = ["TrackingOptions"]


class TrackingOptions(BaseModel):
    """Where a run is logged after its files are written (``eval --track mlflow|opik`` sets ``backend``)."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["mlflow", "opik"] = "mlflow"
    experiment: str = Field("open-rag-eval", min_length=1)  # MLflow: the experiment; Opik: the project
    run_name: str | None = None  # None: the results folder's name (MLflow: the run; Opik: the experiment)
    tracking_uri: str | None = None  # None: MLflow's own default; Opik: OPIK_URL_OVERRIDE, else a local server
    tags: dict[str, str] = {}
    # Opik only (docs/tracking.md)
    dataset: str | None = Field(None, min_length=1)  # None: the experiment (project) name
    workspace: str | None = Field(None, min_length=1)  # None: OPIK_WORKSPACE, else "default"
    api_key_env: str = Field("OPIK_API_KEY", min_length=1)  # the NAME of the variable holding the API key
    timeout_s: float = Field(30.0, gt=0, le=600)  # per request, connect to last byte
    retries: int = Field(2, ge=0, le=10)  # of a request answered 429/5xx or not at all

    @field_validator("tracking_uri")
    @classmethod
    def _opik_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("backend") == "opik" and not value.startswith(("http://", "https://")):
            raise ValueError("Opik is reached over HTTP: give its REST API's base URL, e.g. http://localhost:5173/api")
        return value


register_section("tracking", TrackingOptions)  # core.sections: `tracking:` is validated at load with this schema
