"""Config sections owned by the packages built on the config (``tracking:``, ``diagnosis:``, ``ablate:``): the owner
registers its schema (``core.sections``); a bad section fails at load once registered, and on the owner's read when
not (docs/architecture.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from open_rag_eval.config import load_config_text
from open_rag_eval.core import sections
from open_rag_eval.core.errors import ConfigError
from open_rag_eval.tracking.options import TrackingOptions

CONFIG = "evaluators: [{type: trec}]\njudge: {simulated: {}}\ntracking: {backend: %s, experiment: exp}\n"


def test_a_bad_owned_section_fails_at_load_naming_its_path(tmp_path: Path) -> None:
    assert sections.registered()["tracking"] is TrackingOptions  # imported above: the owner registered itself
    with pytest.raises(ConfigError) as caught:
        load_config_text(CONFIG % "wandb", base_dir=tmp_path, outputs_given=True)
    assert caught.value.path == "tracking.backend" and "'mlflow' or 'opik'" in caught.value.problem


def test_the_owner_reads_its_options_validated(tmp_path: Path) -> None:
    loaded = load_config_text(CONFIG % "opik", base_dir=tmp_path, outputs_given=True)
    options = loaded.section("tracking", TrackingOptions)
    assert isinstance(options, TrackingOptions) and (options.backend, options.experiment) == ("opik", "exp")
    assert loaded.section("diagnosis", TrackingOptions) is None  # absent: None, whatever the schema


def test_an_unregistered_section_is_validated_when_its_owner_reads_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sections, "_SCHEMAS", {})
    loaded = load_config_text(CONFIG % "wandb", base_dir=tmp_path, outputs_given=True)  # nobody registered it
    with pytest.raises(ConfigError) as caught:
        loaded.section("tracking", TrackingOptions)
    assert caught.value.path == "tracking.backend"


def test_only_the_owned_sections_can_be_registered() -> None:
    with pytest.raises(ValueError, match="tracking, diagnosis, ablate"):
        sections.register_section("judge", BaseModel)
