"""The variants of an ablation: every combination of the grid's values applied to the config, each a config of its
own (validated like any config, its errors naming the variant and the YAML path) with its own output folder.

A variant's name says what it sets (``top_k=5``; the whole path when two grid paths end alike); its folder is the
name with characters other than letters, digits and ``._=-`` replaced by ``_``.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from open_rag_eval.ablation.options import AblateOptions, parse_path
from open_rag_eval.config import LoadedConfig, load_config_text
from open_rag_eval.core.errors import ConfigError
from open_rag_eval.run.generation import real_folder

__all__ = ["Variant", "ablate_options", "ablation_root", "build_variants", "set_path"]


@dataclass(frozen=True)
class Variant:
    name: str
    settings: dict[str, Any]  # grid path -> value
    baseline: bool
    folder: Path
    loaded: LoadedConfig


def ablate_options(loaded: LoadedConfig) -> AblateOptions:
    options = loaded.section("ablate", AblateOptions)
    if options is None:
        raise ConfigError("an ablation needs an ablate: section with a grid (docs/ablation.md)", path="ablate",
                          file=str(loaded.path or ""))
    return options


def ablation_root(loaded: LoadedConfig) -> Path:
    options = ablate_options(loaded)
    if options.output_dir:
        return real_folder(loaded.resolve_path(options.output_dir))
    return real_folder(loaded.resolve_path(loaded.config.output_dir)) / "ablation"


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _labels(paths: list[str]) -> dict[str, str]:
    """The short label of each grid path: its last name, or the whole path when two paths end alike."""
    last = {path: str(parse_path(path)[-1]) for path in paths}
    return {path: name if list(last.values()).count(name) == 1 else path for path, name in last.items()}


def _folder(name: str, taken: set[str]) -> str:
    slug = re.sub(r"[^A-Za-z0-9._=-]+", "_", name).strip("._") or "variant"
    folder, n = slug, 1
    while folder in taken:
        n += 1
        folder = f"{slug}-{n}"
    taken.add(folder)
    return folder


def set_path(config: dict[str, Any], path: str, value: Any) -> None:
    """Set ``path`` (``connector.options.top_k``, ``evaluators[0].alpha``) in a config mapping, creating missing
    mappings on the way; a list index that does not exist, or a value in the way, is a config error."""
    parts = parse_path(path)
    node: Any = config
    for depth, part in enumerate(parts[:-1]):
        where = ".".join(str(p) for p in parts[: depth + 1])
        if isinstance(part, int):
            if not isinstance(node, list) or not -len(node) <= part < len(node):
                raise ConfigError(f"'{where}' does not exist in the config", path=f"ablate.grid.{path}")
            node = node[part]
            continue
        if not isinstance(node, dict):
            raise ConfigError(f"'{where}' cannot be set: its parent is not a mapping", path=f"ablate.grid.{path}")
        node = node.setdefault(part, {})
    last = parts[-1]
    fits = -len(node) <= last < len(node) if isinstance(last, int) and isinstance(node, list) else \
        isinstance(last, str) and isinstance(node, dict)
    if not fits:
        raise ConfigError(f"'{path}' cannot be set in the config", path=f"ablate.grid.{path}")
    node[last] = copy.deepcopy(value)


def _variant_config(loaded: LoadedConfig, name: str, settings: dict[str, Any]) -> LoadedConfig:
    raw = copy.deepcopy(loaded.raw)
    raw.pop("ablate", None)
    for path, value in settings.items():
        set_path(raw, path, value)
    file = f"{loaded.path or '<config>'} (variant {name})"
    return load_config_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), base_dir=loaded.base_dir,
                            file=file)


def build_variants(loaded: LoadedConfig) -> list[Variant]:
    """Every variant of the grid, in grid order (the first path varies slowest); all checked before any runs."""
    options = ablate_options(loaded)
    root = ablation_root(loaded)
    paths = list(options.grid)
    labels = _labels(paths)
    baseline = {path: options.baseline.get(path, options.grid[path][0]) for path in paths}
    taken: set[str] = set()
    variants = []
    for values in itertools.product(*(options.grid[path] for path in paths)):
        settings = dict(zip(paths, values))
        name = ", ".join(f"{labels[path]}={_shown(value)}" for path, value in settings.items())
        is_baseline = all(json.dumps(settings[p], sort_keys=True) == json.dumps(baseline[p], sort_keys=True)
                          for p in paths)
        variants.append(Variant(name, settings, is_baseline, root / _folder(name, taken),
                                _variant_config(loaded, name, settings)))
    return variants
