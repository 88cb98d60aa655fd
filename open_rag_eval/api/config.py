"""The ``config`` and ``**options`` of ``evaluate`` -> a validated ``LoadedConfig``.

``config`` is None (the trec evaluator; the judge from ``judge=`` or the defaults, i.e. ``OPENAI_API_KEY``), a path
to a YAML config, or a dict with the same sections. Each option replaces the top-level section of its name
(``judge={"simulated": {}}``, ``evaluators=[{"type": "trec"}]``, ``report={...}``). The data comes from ``evaluate``'s
``data``, so ``input`` and ``connector`` are not used; every other check is the CLI's (``config.load_config_text``).
"""

from __future__ import annotations

import copy
import logging
import os
from pathlib import Path
from typing import Any

import yaml

# the config sections whose schemas their owners register (core.sections): a bad one fails at load
import open_rag_eval.ablation.options  # noqa: F401
import open_rag_eval.diagnosis.options  # noqa: F401
import open_rag_eval.tracking.options  # noqa: F401
from open_rag_eval.config import LoadedConfig, read_config_text, parse_yaml, load_config_text
from open_rag_eval.core.errors import ConfigError

__all__ = ["DEFAULT_EVALUATORS", "api_config"]

log = logging.getLogger(__name__)

DEFAULT_EVALUATORS = [{"type": "trec"}]
_DATA_SECTIONS = ("input", "connector")


def api_config(config: str | os.PathLike[str] | dict[str, Any] | None, options: dict[str, Any]) -> LoadedConfig:
    raw, base_dir, file = _raw(config)
    raw.update(copy.deepcopy(options))
    raw["tracking"] = _tracking_section(raw.get("tracking"))
    if raw["tracking"] is None:
        del raw["tracking"]
    for name in _DATA_SECTIONS:
        if raw.pop(name, None) is not None:
            log.info("%s: '%s' is not used: evaluate() evaluates the data it is given", file, name)
    raw.setdefault("evaluators", copy.deepcopy(DEFAULT_EVALUATORS))
    try:
        text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError as error:
        raise ConfigError(f"the config holds a value that is not plain data (str, number, bool, list, dict): "
                          f"{error}", file=file) from None
    return load_config_text(text, base_dir=base_dir, file=file, outputs_given=True)


def _tracking_section(value: Any) -> Any:
    """``tracking="mlflow"`` is ``{"backend": "mlflow"}``; a ``TrackingOptions`` is its fields."""
    if isinstance(value, str):
        return {"backend": value}
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return value


def _raw(config: str | os.PathLike[str] | dict[str, Any] | None) -> tuple[dict[str, Any], Path, str]:
    if config is None:
        return {}, Path.cwd(), "<config>"
    if isinstance(config, dict):
        return copy.deepcopy(config), Path.cwd(), "<config>"
    if isinstance(config, (str, os.PathLike)):
        path = Path(config)
        return parse_yaml(read_config_text(path), str(path)), path.resolve().parent, str(path)
    raise ConfigError(f"config must be None, a path to a YAML file or a dict, got {type(config).__name__}")
