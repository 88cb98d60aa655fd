"""Config sections owned by the packages built on the config (``tracking:``, ``diagnosis:``, ``ablate:``): the owner
registers its schema (``core.sections``); a bad section fails at load once registered, and on the owner's read when
not (docs/architecture.md)."""

from __future__ import annotations

import os
import subprocess
import sys
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


NAMED_ONLY = """
import sys
import os
import subprocess
import sys
from pathlib import Path
from open_rag_eval.cli import register_sections
from open_rag_eval.config import load_config_text
from open_rag_eval.core.errors import ConfigError

register_sections()  # the CLI names the owners; it imports none
base = Path(sys.argv[1])
plain = "evaluators: [{type: trec}]\\njudge: {simulated: {}}\\n"
load_config_text(plain, base_dir=base, outputs_given=True)
print(sorted(m for m in sys.modules if m.split(".")[1:2] in (["diagnosis"], ["ablation"], ["tracking"])))
try:
    load_config_text(plain + "diagnosis: {disable: [no_such_rule]}\\n", base_dir=base, outputs_given=True)
except ConfigError as error:
    print(error.path, "no_such_rule" in error.problem, "open_rag_eval.diagnosis.options" in sys.modules)
"""


def test_the_cli_imports_an_owner_only_for_a_config_with_its_section(tmp_path: Path) -> None:
    """The CLI names the owners (``register_owner``): a config without their sections loads without importing them
    (nothing of theirs before a run's first judge request), and one with a bad section still fails at load."""
    done = subprocess.run([sys.executable, "-c", NAMED_ONLY, str(tmp_path)], capture_output=True, text=True,
                          check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.stdout.splitlines() == ["[]", "diagnosis.disable True True"]


def test_an_owner_can_only_be_named_for_an_owned_section() -> None:
    with pytest.raises(ValueError, match="tracking, diagnosis, ablate"):
        sections.register_owner("judge", "open_rag_eval.tracking.options")
