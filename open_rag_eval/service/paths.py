"""Server paths stay on the server: a client's config names none, and what a job serves names none.

At the door, a client-sent config naming a file or folder (an evaluator's path-valued options, caches, model folders,
key variables) is refused with a 422 naming the field: a client never reads or probes the server's disk, whatever
the path -- ``../<another job>/results``, ``/etc`` and ``/nonexistent`` get the same answer. Model names must be hub
ids (``org/name``), never local folders.

After a run, the job's JSON files (results.json, manifest.json) are rewritten in place to carry job-relative names
(``input.jsonl:3``) and the judge profile's name instead of its URL, key variable and the tenant's cache path.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import ConfigError

__all__ = ["check_client_paths", "relative_text", "served_files"]

PATH_KEYS = frozenset({"results_dir", "qrels", "run", "id_map", "corpus", "labels", "model_path", "cache_dir",
                       "cache", "input", "output_dir", "history", "queries", "path", "file", "folder", "prompt_file",
                       "prompts_dir"})
SERVER_KEYS = frozenset({"api_key_env", "base_url", "base_urls", "env"})  # the server's environment and endpoints
MODEL_KEYS = frozenset({"model", "model_name", "model_type", "tokenizer"})
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?")
JUDGE_HIDDEN = ("base_url", "base_urls", "api_key_env", "cache")
SERVED_JSON = ("results.json", "manifest.json")


def check_client_paths(entries: Iterable[Any], path_options: dict[int, tuple[str, ...]]) -> None:
    """Refuse any path-valued option in a client's evaluator entries (``path_options``: each entry's class's own
    ``PATH_OPTIONS``); raises ``ConfigError`` naming the field."""
    for i, entry in enumerate(entries):
        if isinstance(entry, dict):
            _walk(entry, f"config.evaluators[{i}]", PATH_KEYS | set(path_options.get(i, ())))


def _walk(value: dict[str, Any], where: str, path_keys: frozenset[str] | set[str]) -> None:
    for key, item in value.items():
        field = f"{where}.{key}"
        if key in path_keys and item is not None:
            raise ConfigError("a client config names no server file or folder; the job's own inputs come with the "
                              "request, anything else through a server-side config (config_name)", path=field)
        if key in SERVER_KEYS and item is not None:
            raise ConfigError("the server's environment and endpoints are set by its operator: use a server-side "
                              "config (config_name)", path=field)
        if key in MODEL_KEYS and item is not None and not _hub_id(item):
            raise ConfigError("a model is named by its hub id (org/name), never by a folder on the server", path=field)
        if isinstance(item, dict):
            _walk(item, field, path_keys)
        elif isinstance(item, list):
            for j, element in enumerate(item):
                if isinstance(element, dict):
                    _walk(element, f"{field}[{j}]", path_keys)


def _hub_id(value: Any) -> bool:
    return isinstance(value, str) and HUB_ID.fullmatch(value) is not None and ".." not in value


def relative_text(text: str, folders: Iterable[str | Path]) -> str:
    """``text`` with each folder's prefix removed (longest first): names relative to the job's own folder."""
    for folder in sorted({str(f).rstrip(os.sep) for f in folders if str(f)}, key=len, reverse=True):
        text = text.replace(folder + os.sep, "").replace(folder, ".")
    return text


def served_files(results_dir: Path, folders: list[str | Path], profile: str | None) -> None:
    """Rewrite the run's JSON files in ``results_dir`` so that they name no server path and no judge endpoint or key
    variable: paths relative to ``folders[0]`` (the job's folder), the judge by its profile's name."""
    for name in SERVED_JSON:
        path = results_dir / name
        if path.is_file():
            _rewrite(path, folders, profile if name == "manifest.json" else None)


def _rewrite(path: Path, folders: list[str | Path], profile: str | None) -> None:
    escaped = [json.dumps(str(folder), ensure_ascii=False)[1:-1] for folder in folders]
    partial = path.with_name(f".{path.name}.part")
    with path.open(encoding="utf-8") as source, partial.open("w", encoding="utf-8") as target:
        if profile is None:  # results.json may be large: line by line (a path never spans lines)
            for line in source:
                target.write(relative_text(line, escaped))
        else:
            target.write(relative_text(_judge_by_profile(source.read(), profile), escaped))
    partial.replace(path)


def _judge_by_profile(text: str, profile: str) -> str:
    data = json.loads(text)
    for section in (data.get("judge"), (data.get("config") or {}).get("judge")):
        if isinstance(section, dict):
            for key in JUDGE_HIDDEN:
                section.pop(key, None)
            section["profile"] = profile
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
