"""From a submitted job to a job folder holding the exact config file the CLI would run.

A client sends a config inline (checked against what a client may ask of the server) or names a server-side config;
its inputs come inline (JSONL or CSV text) or as an upload id; it names a judge profile. The job folder gets the
input file and ``job.yaml``: the config with the input, the results folder, and the judge profile's section (its
cache the tenant's own file) filled in, all as absolute paths. ``open-rag-eval eval --config job.yaml`` gives the
same result files as the service, byte for byte. Validation happens here, at the door: a bad config or input is
a 422 naming the field, file and line before anything is queued.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

# the config sections whose schemas their owners register (core.sections): a bad one fails at load
import open_rag_eval.ablation.options  # noqa: F401
import open_rag_eval.diagnosis.options  # noqa: F401
import open_rag_eval.tracking.options  # noqa: F401
from open_rag_eval.core.errors import ConfigError, InputError
from open_rag_eval.service.bounds import check_bounds
from open_rag_eval.service.paths import check_client_paths
from open_rag_eval.service.settings import Settings

__all__ = ["Inputs", "JobRequest", "Prepared", "SweepRequest", "prepare", "request_hash", "tenant_dir"]

CLIENT_SECTIONS = {"evaluators", "report", "connector", "sweep"}
CLIENT_SWEEP = {"system", "baseline", "thresholds", "fail_if_drop", "alpha", "seed"}


class Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["jsonl", "csv"]
    data: str = Field(description="the file's text: RAG outputs (JSONL/CSV), or a connector's queries (CSV)")


class LabelsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    data: str = Field(description="people's labels as a file's text: TREC qrels (UMBRELA grades) or TSV/JSONL "
                      "(citation support, nugget labels), as `open-rag-eval calibrate --labels` reads them")


class JobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: dict[str, Any] | None = Field(None, description="a config's sections (evaluators, report, connector); "
                                          "no judge, input or output_dir: the server supplies them")
    config_name: str | None = Field(None, description="the name of a server-side config, instead of `config`")
    inputs: Inputs | None = None
    upload_id: str | None = Field(None, description="an upload's id (POST /v1/uploads), instead of `inputs`")
    judge_profile: str | None = Field(None, description="a judge profile the server defines (GET /v1/info)")
    limit: int | None = Field(None, ge=1, description="evaluate only the first N queries")
    labels: list[LabelsFile] | None = Field(None, max_length=8, description="people's labels: the judged "
                                            "metrics' corrected means join summary.csv (docs/calibration.md)")


class SweepRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=256)
    config: dict[str, Any] = Field(description="connector (repeats >= 2), evaluators, sweep thresholds")
    queries: str = Field(description="the connector's queries as CSV text (a `query` column)")
    judge_profile: str | None = None


class Prepared(BaseModel):
    job_dir: str
    config_file: str
    base_dir: str
    n_outputs: int


def request_hash(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def tenant_dir(settings: Settings, tenant: str) -> Path:
    return settings.data_path / "tenants" / tenant


def check_client_config(config: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """A client-sent config may choose evaluators, report and an allowed http connector -- nothing that reads the
    server's files or environment, runs code, or names a judge."""
    unknown = sorted(set(config) - CLIENT_SECTIONS)
    if unknown:
        why = ("the server supplies it (name a judge_profile; send inputs)"
               if set(unknown) & {"judge", "input", "output_dir"} else "not accepted from a client")
        from open_rag_eval.config.guard import nearest

        hint = "" if set(unknown) & {"judge", "input", "output_dir"} else nearest(unknown[0], sorted(CLIENT_SECTIONS))
        raise ConfigError(f"section '{unknown[0]}': {why}{hint}; a client config may have: "
                          f"{', '.join(sorted(CLIENT_SECTIONS))}", path=f"config.{unknown[0]}")
    _no_interpolation(config, "config")
    for i, entry in enumerate(config.get("evaluators") or []):
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind not in settings.inline_evaluators:
            raise ConfigError(f"evaluator type {kind!r} is not accepted in a client config; this server allows: "
                              f"{', '.join(settings.inline_evaluators)} (others through a server-side config)",
                              path=f"config.evaluators[{i}].type")
    check_client_paths(config.get("evaluators") or [], _path_options(config.get("evaluators") or []))
    connector = config.get("connector")
    if connector is not None:
        _check_connector(connector, settings)
    unknown_sweep = sorted(set(config.get("sweep") or {}) - CLIENT_SWEEP)
    if unknown_sweep:
        raise ConfigError(f"'{unknown_sweep[0]}' is set by the server", path=f"config.sweep.{unknown_sweep[0]}")
    return copy.deepcopy(config)


def _path_options(entries: list[Any]) -> dict[int, tuple[str, ...]]:
    """Each allowed evaluator's own path-valued options (``PATH_OPTIONS``), by its place in the list."""
    from open_rag_eval.registry import resolve

    return {i: tuple(getattr(resolve("evaluator", entry["type"], path=f"config.evaluators[{i}].type"),
                             "PATH_OPTIONS", ())) for i, entry in enumerate(entries)}


def _no_interpolation(value: Any, path: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _no_interpolation(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _no_interpolation(item, f"{path}[{i}]")
    elif isinstance(value, str) and "${" in value:
        raise ConfigError("environment references (${...}) are not accepted from a client", path=path)


def _check_connector(connector: Any, settings: Settings) -> None:
    if not isinstance(connector, dict) or connector.get("type") != "http":
        raise ConfigError("a client config may use only the http connector", path="config.connector.type")
    if "queries" in connector:
        raise ConfigError("the queries come from the job's inputs (CSV)", path="config.connector.queries")
    options = connector.get("options") or {}
    if not isinstance(options, dict):
        raise ConfigError("must be a mapping", path="config.connector.options")
    if "secret_headers" in options:
        raise ConfigError("secret headers read the server's environment: use a server-side config",
                          path="config.connector.options.secret_headers")
    url = options.get("url")
    if not isinstance(url, str) or not settings.connector_allowed(url):
        raise ConfigError("the connector URL is not on this server's allow-list (connector_allow)",
                          path="config.connector.options.url")


def _server_config(settings: Settings, name: str) -> tuple[dict[str, Any], Path]:
    from open_rag_eval.config import parse_yaml

    if name not in settings.configs:
        raise ConfigError(f"unknown config {name!r}; this server has: {', '.join(settings.configs) or 'none'}",
                          path="config_name")
    path = settings.resolve(settings.configs[name])
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as error:  # the operator's file: the client sees its name, not the server's path
        raise ConfigError(f"server config {name!r} cannot be read ({error.strerror})", path="config_name") from None
    return parse_yaml(text, name), path.parent


def judge_section(settings: Settings, profile: str, tenant: str) -> dict[str, Any]:
    section = copy.deepcopy(settings.judge_profiles[profile])
    section["cache"] = str(tenant_dir(settings, tenant) / "judge-cache.sqlite")  # one cache per tenant
    return section


def prepare(settings: Settings, tenant: str, job_id: str, request: JobRequest) -> Prepared:
    """Write the job folder (input + ``job.yaml``) and validate it like ``eval`` would; on any error the folder is
    removed and the error raised (``ConfigError`` / ``InputError``)."""
    job_dir = settings.data_path / "jobs" / job_id
    job_dir.mkdir(parents=True, exist_ok=False)
    try:
        return _prepare(settings, tenant, job_dir, request)
    except BaseException:
        shutil.rmtree(job_dir, ignore_errors=True)
        raise


def _prepare(settings: Settings, tenant: str, job_dir: Path, request: JobRequest) -> Prepared:
    from open_rag_eval.config import load_config_text
    from open_rag_eval.run.corrected import run_labels

    if request.config is not None and request.config_name is not None:
        raise ConfigError("send either config or config_name, not both", path="config_name")
    if request.config_name is not None:
        raw, base_dir = _server_config(settings, request.config_name)
    else:
        raw, base_dir = check_client_config(request.config or {"evaluators": [{"type": "trec"}]}, settings), job_dir
    raw.pop("sweep", None)
    input_file = _input_file(settings, tenant, job_dir, request)
    if raw.get("connector") is not None:
        if input_file is None:
            raise InputError("a connector job needs its queries: send inputs (CSV) or an upload_id", field="inputs")
        raw["connector"]["queries"] = str(input_file)
        raw.pop("input", None)
    elif input_file is not None:
        raw["input"] = str(input_file)
    if request.labels:
        raw["labels"] = [str(_labels_file(job_dir, i, f)) for i, f in enumerate(request.labels, 1)]
    raw["output_dir"] = str(job_dir / "results")
    raw["judge"] = judge_section(settings, settings.profile(request.judge_profile), tenant)
    config_file = job_dir / "job.yaml"
    text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
    config_file.write_text(text, encoding="utf-8")
    loaded = load_config_text(text, base_dir=base_dir, file="job.yaml")
    if "input" not in raw and raw.get("connector") is None and not _own_rows(loaded):
        raise InputError("send inputs (JSONL or CSV) or an upload_id", field="inputs")
    run_labels([loaded.resolve_path(p) for p in loaded.config.labels or ()])  # bad labels: 422 at the door
    n = _count(loaded, request.limit)
    return Prepared(job_dir=str(job_dir), config_file=str(config_file), base_dir=str(base_dir), n_outputs=n)


def _own_rows(loaded: Any) -> bool:
    """A server-side config whose evaluator has rows of its own (golden's TREC run file) needs no inputs."""
    from open_rag_eval.run import pipeline

    return pipeline.own_rows([spec.build() for spec in loaded.evaluators])


def _count(loaded: Any, limit: int | None) -> int:
    from open_rag_eval.evaluators.base import check_answers
    from open_rag_eval.run import pipeline

    connector = loaded.config.connector
    if connector is None:  # every output built and checked, a window at a time (memory: a window, not the input)
        source = pipeline.open_source(loaded, limit)
        evaluators = [spec.build() for spec in loaded.evaluators]
        for window in source.windows():
            check_answers(evaluators, window)  # no answer where a configured metric reads one: 422 at the door
        return source.n_outputs
    from open_rag_eval.inputs import read_queries

    queries = read_queries(loaded.resolve_path(connector.queries))
    return len(queries[:limit] if limit else queries) * connector.repeats


def _labels_file(job_dir: Path, number: int, labels: LabelsFile) -> Path:
    path = job_dir / f"labels{number}.txt"
    try:
        path.write_text(labels.data, encoding="utf-8")
    except UnicodeEncodeError as error:
        raise InputError(f"not valid Unicode at character {error.start} (a lone surrogate): send UTF-8 text",
                         field=f"labels[{number - 1}].data") from None
    return path  # its size is the request body's, bounded by limits.max_body_mb


def _input_file(settings: Settings, tenant: str, job_dir: Path, request: JobRequest) -> Path | None:
    if request.inputs is not None and request.upload_id is not None:
        raise InputError("send either inputs or upload_id, not both", field="upload_id")
    if request.inputs is not None:
        path = job_dir / f"input.{request.inputs.format}"
        try:
            path.write_text(request.inputs.data, encoding="utf-8")
        except UnicodeEncodeError as error:
            raise InputError(f"not valid Unicode at character {error.start} (a lone surrogate): send UTF-8 text",
                             field="inputs.data") from None
        check_bounds(path, request.inputs.format, settings.limits, "inputs.data")
        return path
    if request.upload_id is not None:
        found = sorted((tenant_dir(settings, tenant) / "uploads").glob(f"{_safe_id(request.upload_id)}.*"))
        if not found:
            raise InputError(f"no upload {request.upload_id!r}", field="upload_id")
        path = job_dir / f"input{found[0].suffix}"
        shutil.copyfile(found[0], path)
        check_bounds(path, found[0].suffix.lstrip("."), settings.limits, "upload_id")  # the limits of today
        return path
    return None


def _safe_id(value: str) -> str:
    return value if value.isalnum() else "-"
