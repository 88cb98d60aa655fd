"""Validated configs: ``load_config(path)`` reads YAML, interpolates ``${VAR}`` / ``${oc.env:VAR}``, translates the
peer's config layout, and validates every section -- evaluator options included -- before any work starts.

Relative paths in a config resolve against the config file's folder. Errors name the YAML path and the valid choices.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, ValidationError

from open_rag_eval.config.executor import ExecutorOptions
from open_rag_eval.config.connector import ConnectorConfig, connector_spec
from open_rag_eval.config.guard import BudgetComposer, check_evaluators, check_numbers, config_error, load_yaml
from open_rag_eval.core.errors import ConfigError
from open_rag_eval.judge.config import JudgeConfig
from open_rag_eval.config.peer import is_peer_config, translate_peer_config
from open_rag_eval.core.sections import SECTIONS, schema_of
from open_rag_eval.profiles import ProfileName
from open_rag_eval.core.redaction import register_interpolated
from open_rag_eval.store.sqlite import setting_path
from open_rag_eval.registry import resolve

__all__ = ["Config", "EvaluatorSpec", "LoadedConfig", "ReportOptions", "SweepOptions", "absolute_paths", "config_error",
           "load_config", "load_config_text", "load_judge_config", "parse_yaml", "read_config_text"]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
_ENV = re.compile(r"\$\{(?:oc\.env:)?([A-Za-z_][A-Za-z0-9_]*)(?:(?::-|,)([^}]*))?\}")


class SweepOptions(BaseModel):
    """The ``sweep:`` section (scheduled consistency sweeps)."""

    model_config = ConfigDict(extra="forbid")

    history: str = ".open-rag-eval/history.sqlite"
    system: str = "default"
    baseline: str = "previous"  # or a pinned sweep id
    # metric -> largest allowed drop of its mean (when significant)
    thresholds: dict[str, Annotated[float, Field(ge=0)]] = {}
    # metric -> a drop larger than this is a regression, whatever the test says
    fail_if_drop: dict[str, Annotated[float, Field(ge=0)]] = {}
    alpha: float = Field(0.05, gt=0, lt=1)
    seed: int = 0


class ReportOptions(BaseModel):
    """The ``report:`` section: which numbers the report's headline panel shows and the targets that colour them."""

    model_config = ConfigDict(extra="forbid")

    headline: list[str] | None = None  # metric names; None: the default headline set (docs/report.md)
    targets: dict[str, FiniteFloat] = {}  # metric -> the value it should reach (or stay under, for lower-is-better)


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: str | None = None  # CSV (open-rag-eval layout) or JSONL
    output_dir: str = "results"
    judge: JudgeConfig | None = None
    evaluators: list[dict[str, Any]] = Field(min_length=1)
    connector: ConnectorConfig | None = None
    sweep: SweepOptions | None = None
    report: ReportOptions | None = None
    # sections whose schema is their owner's (core.sections): open_rag_eval.tracking.options (docs/tracking.md),
    # open_rag_eval.diagnosis.options (docs/diagnosis.md), open_rag_eval.ablation.options (docs/ablation.md)
    tracking: dict[str, Any] | None = None
    diagnosis: dict[str, Any] | None = None
    executor: ExecutorOptions | None = None  # docs/scaling.md
    ablate: dict[str, Any] | None = None  # read by `open-rag-eval ablate` only
    profile: ProfileName | None = None  # every evaluator's profile unless it names its own (docs/profiles.md)
    # people's labels (qrels, TSV, JSONL) correcting the judged metrics' means (docs/calibration.md)
    labels: list[str] | None = None


@dataclass(frozen=True)
class EvaluatorSpec:
    type: str
    cls: builtins.type[Any]
    options: BaseModel

    def build(self) -> Any:
        return self.cls(self.options)

    def files(self) -> dict[str, str]:
        """Its options naming files it reads (the class's ``PATH_OPTIONS``, resolved at load), those set."""
        names: tuple[str, ...] = getattr(self.cls, "PATH_OPTIONS", ())
        values = {name: getattr(self.options, name, None) for name in names}
        return {name: str(value) for name, value in values.items() if value}


@dataclass
class LoadedConfig:
    """A validated config with what was derived from it."""

    config: Config
    evaluators: list[EvaluatorSpec]
    base_dir: Path
    path: Path | None = None
    raw: dict[str, Any] = field(default_factory=dict)  # before interpolation: env references, never their values
    sections: dict[str, BaseModel] = field(default_factory=dict)  # the owned sections validated at load

    def resolve_path(self, value: str | Path) -> Path:
        return setting_path(value, self.base_dir)

    @property
    def judge(self) -> JudgeConfig:
        return self.config.judge or JudgeConfig()

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.raw, sort_keys=True, default=str).encode()).hexdigest()

    def section(self, name: str, schema: type[M]) -> M | None:
        """The owned section ``name`` (``core.sections``) validated by its owner's ``schema``; None when absent."""
        found = self.sections.get(name)
        if isinstance(found, schema):
            return found
        value = getattr(self.config, name)
        if value is None:
            return None
        validated = _validate_section(name, value, schema, str(self.path or "<config>"))
        self.sections[name] = validated
        return validated



def _validate_section(name: str, value: dict[str, Any], schema: type[M], file: str) -> M:
    try:
        validated = schema.model_validate(value)
    except ValidationError as error:
        raise config_error(error, schema, file, prefix=name) from None
    check_numbers(validated, name, file)
    return validated


def read_config_text(path: Path) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as error:
        raise ConfigError(f"cannot read config: {error.strerror}", file=str(path)) from None
    except UnicodeDecodeError:
        raise ConfigError("config is not UTF-8 text", file=str(path)) from None
    return text


def load_config(path: Path) -> LoadedConfig:
    text = read_config_text(path)
    return load_config_text(text, base_dir=Path(path).resolve().parent, file=str(path))


def load_config_text(text: str, *, base_dir: Path, file: str = "<config>", outputs_given: bool = False) -> LoadedConfig:
    """``outputs_given``: the caller brings the outputs (the Python API), so neither input nor connector is needed."""
    raw = parse_yaml(text, file)
    if is_peer_config(raw):
        raw = translate_peer_config(raw, file=file)
        log.info("%s: translated the config layout of vectara's open-rag-eval (input_queries/results_folder/"
                 "evaluator) to ours", file)
    interpolated = _interpolate(raw, "", file)
    check_numbers(interpolated, "", file)  # YAML's .inf/.nan/huge numbers, named by their path before validation
    try:
        config = Config.model_validate(interpolated)
    except ValidationError as error:
        raise config_error(error, Config, file) from None
    check_numbers(config, "", file)  # and strings such as "inf" that validation turned into numbers
    sections = {name: _validate_section(name, getattr(config, name), schema, file)
                for name in SECTIONS if getattr(config, name) is not None and (schema := schema_of(name)) is not None}
    specs = [_evaluator_spec(entry, f"evaluators[{i}]", file, base_dir, config.profile)
             for i, entry in enumerate(config.evaluators)]
    for i, spec in enumerate(specs):
        check_numbers(spec.options, f"evaluators[{i}]", file)
    check_evaluators(specs, config.sweep, file)
    if config.connector is not None:
        check_numbers(connector_spec(config.connector, file=file)[1], "connector.options", file)
    if not outputs_given:
        _check_inputs(config, specs, file)
    return LoadedConfig(config, specs, base_dir, Path(file) if file != "<config>" else None, raw, sections)


class _UniqueKeyLoader(BudgetComposer, yaml.SafeLoader):
    """A safe loader that refuses a key given twice in one mapping (PyYAML would keep the last silently), and
    aliases beyond a small budget or recursive ones (``BudgetComposer``)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if not isinstance(key, (str, int, float, bool)):
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}' (given twice in one mapping)", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_judge_config(path: Path) -> JudgeConfig:
    """Only the ``judge:`` section of a config file (commands that need a judge but no evaluators or input)."""
    text = read_config_text(path)
    section = _interpolate(parse_yaml(text, str(path)).get("judge") or {}, "judge", str(path))
    check_numbers(section, "judge", str(path))
    try:
        return JudgeConfig.model_validate(section)
    except ValidationError as error:
        raise config_error(error, JudgeConfig, str(path), prefix="judge") from None


def parse_yaml(text: str, file: str) -> dict[str, Any]:
    data = load_yaml(text, _UniqueKeyLoader, file)
    if not isinstance(data, dict):
        raise ConfigError("a config must be a YAML mapping of sections (input, output_dir, judge, evaluators...)",
                          file=file)
    return data


def _interpolate(value: Any, path: str, file: str) -> Any:
    if isinstance(value, dict):
        return {key: _interpolate(item, f"{path}.{key}" if path else str(key), file) for key, item in value.items()}
    if isinstance(value, list):
        return [_interpolate(item, f"{path}[{i}]", file) for i, item in enumerate(value)]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise ConfigError(f"environment variable {name} is not set", path=path, file=file)

    result = _ENV.sub(replace, value)
    if result != value:  # a credential taken from the environment is redacted from every message and file
        register_interpolated(path, result)
    return result


_SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "auth", "credential", "cookie", "header")


def recorded_config(value: Any, path: str = "") -> Any:
    """The config as the manifest records it: a ``${VAR:-default}`` that fell back to its default (written in
    the config itself) is recorded as that default, and one whose variable holds a number or true/false as that
    value (``timeout_s: ${T:-60}`` -> 60) -- unless its key looks like a secret. Any other reference stays as
    written: a string from the environment may be a secret and is never recorded."""
    if isinstance(value, dict):
        return {key: recorded_config(item, f"{path}.{key}" if path else str(key)) for key, item in value.items()}
    if isinstance(value, list):
        return [recorded_config(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if not isinstance(value, str) or not _ENV.search(value) or any(w in path.lower() for w in _SECRET_WORDS):
        return value
    whole = _ENV.fullmatch(value.strip())
    if whole is not None:
        name, default = whole.group(1), whole.group(2)
        if name in os.environ:
            typed = _scalar(os.environ[name])
            return typed if isinstance(typed, (bool, int, float)) else value
        return _scalar(default) if default is not None else value
    if all(match.group(1) not in os.environ and match.group(2) is not None for match in _ENV.finditer(value)):
        return _ENV.sub(lambda match: match.group(2), value)  # only defaults, all written in the config
    return value


def _scalar(text: str) -> Any:
    """A YAML scalar's value (``60`` -> 60, ``true`` -> True); the text itself when it is anything else."""
    try:
        typed = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(typed, float) and not math.isfinite(typed):
        return text
    return typed if isinstance(typed, (bool, int, float)) else text


def _evaluator_spec(entry: dict[str, Any], path: str, file: str, base_dir: Path,
                    profile: str | None = None) -> EvaluatorSpec:
    if "type" not in entry:
        raise ConfigError("missing 'type' (e.g. trec, consistency, golden)", path=path, file=file)
    options = {key: value for key, value in entry.items() if key != "type"}
    try:
        cls = resolve("evaluator", str(entry["type"]), path=f"{path}.type")
    except ConfigError as error:
        raise ConfigError(error.problem, path=error.path, file=file) from None
    lacking = [name for name in ("Options", "contract", "plan", "evaluate", "forget")
               if getattr(cls, name, None) is None]
    if lacking:
        raise ConfigError(f"the evaluator class '{entry['type']}' lacks {', '.join(lacking)}: an evaluator declares "
                          "its contract (docs/architecture.md, 'Add an evaluator')", path=f"{path}.type", file=file)
    if profile is not None and "profile" in cls.Options.model_fields:
        options.setdefault("profile", profile)
    try:
        validated = cls.Options.model_validate(options)
    except ValidationError as error:
        raise config_error(error, cls.Options, file, prefix=path) from None
    return EvaluatorSpec(str(entry["type"]), cls, absolute_paths(validated, getattr(cls, "PATH_OPTIONS", ()), base_dir))


def absolute_paths(options: BaseModel, names: tuple[str, ...], base_dir: Path) -> BaseModel:
    """Options naming files (an evaluator's ``PATH_OPTIONS``) resolve against the config's folder, like ``input``."""
    update = {}
    for name in names:
        value = getattr(options, name, None)
        if value and not Path(os.path.expanduser(str(value))).is_absolute():
            update[name] = os.path.normpath(base_dir / str(value))
    return options.model_copy(update=update) if update else options


def _check_inputs(config: Config, specs: list[EvaluatorSpec], file: str) -> None:
    own_data = any(getattr(spec.options, "run", None) or getattr(spec.options, "results_dir", None) for spec in specs)
    if config.input is None and config.connector is None and not own_data:
        raise ConfigError("required: the RAG outputs to evaluate (a CSV or JSONL file), or a connector:", path="input",
                          file=file)
    if config.input is not None and config.connector is not None:
        raise ConfigError("give either input or connector, not both", path="connector", file=file)
