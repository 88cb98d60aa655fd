"""The ``connector:`` section: which connector class to run, on which queries, and its options.

The options are validated here, at load time, by the connector's own ``Options`` model, so a typo fails before any
query is sent. Running a connector is ``connectors``'s job; this module only names and checks one.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from open_rag_eval.config.guard import config_error
from open_rag_eval.core.errors import ConfigError
from open_rag_eval.registry import resolve

__all__ = ["ConnectorConfig", "connector_spec"]


class ConnectorConfig(BaseModel):
    """The ``connector:`` section."""

    model_config = ConfigDict(extra="forbid")

    type: str  # "http" or "module:Class"
    queries: str  # CSV with a `query` column (and optional `query_id`)
    repeats: int = Field(1, ge=1, le=1000)
    options: dict[str, Any] = {}  # validated by the connector's own Options model


def connector_spec(config: ConnectorConfig, *, file: str = "") -> tuple[Any, BaseModel]:
    """The connector class ``config.type`` names and its validated options (errors name the YAML path)."""
    try:
        cls = resolve("connector", config.type, path="connector.type")
    except ConfigError as error:
        raise ConfigError(error.problem, path=error.path, file=file) from None
    try:
        return cls, cls.Options.model_validate(config.options)
    except ValidationError as error:
        raise config_error(error, cls.Options, file, prefix="connector.options") from None
