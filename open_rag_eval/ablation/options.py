"""The ``ablate:`` section of a config: the grid of variants and how they are compared.

    ablate:
      grid:                                   # a config path -> the values to try; variants = every combination
        connector.options.top_k: [1, 3, 5]
        evaluators[0].groundedness_threshold: [0.1, 0.2]
      baseline: {connector.options.top_k: 3}  # default: the first value of each path
      metrics: [golden.recall@5, golden.mrr]  # default: the headline metrics every variant has
      alpha: 0.05                             # family-wise, Holm-corrected over every (variant, metric) test
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from open_rag_eval.core.sections import register_section

__all__ = ["MAX_VARIANTS", "AblateOptions", "parse_path"]

MAX_VARIANTS = 64
FIXED = ("input", "output_dir", "connector.queries", "ablate", "evaluators")  # what every variant must share
_PART = re.compile(r"([^.\[\]]+)|\[([0-9]+)\]")


def parse_path(path: str) -> list[str | int]:
    """``evaluators[0].alpha`` (or ``evaluators.0.alpha``) -> ``["evaluators", 0, "alpha"]``."""
    parts: list[str | int] = []
    position = 0
    for match in _PART.finditer(path):
        if match.start() != position and path[position:match.start()] != ".":
            raise ValueError(f"'{path}' is not a config path (e.g. connector.options.top_k, evaluators[0].alpha)")
        name, index = match.groups()
        parts.append(int(index) if index is not None else int(name) if name.isdigit() else name)
        position = match.end()
    if not parts or position != len(path) or isinstance(parts[0], int) or path.startswith("."):
        raise ValueError(f"'{path}' is not a config path (e.g. connector.options.top_k, evaluators[0].alpha)")
    return parts


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class AblateOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grid: dict[str, list[Any]] = Field(min_length=1)
    baseline: dict[str, Any] = {}
    metrics: list[str] | None = Field(None, min_length=1)
    alpha: float = Field(0.05, gt=0, lt=1)
    seed: int = 0
    resamples: int = Field(10_000, ge=100, le=1_000_000)
    output_dir: str | None = None  # default: <output_dir>/ablation

    @field_validator("grid")
    @classmethod
    def _grid(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        combinations = 1
        for path, values in grid.items():
            parts = parse_path(path)
            shown = ".".join(str(p) for p in parts)
            if shown in FIXED or any(shown.startswith(f"{f}.") for f in FIXED if f != "evaluators") or \
                    parts[0] == "evaluators" and (len(parts) < 3 or parts[2] == "type"):
                raise ValueError(f"'{path}' cannot vary: every variant runs on the same queries and evaluators "
                                 "(vary an option inside one, e.g. evaluators[0].alpha)")
            if not values:
                raise ValueError(f"'{path}' has no values")
            if len({_key(v) for v in values}) != len(values):
                raise ValueError(f"'{path}' lists a value twice")
            combinations *= len(values)
        if combinations > MAX_VARIANTS:
            raise ValueError(f"the grid makes {combinations} variants; at most {MAX_VARIANTS}")
        return grid

    @model_validator(mode="after")
    def _baseline_in_grid(self) -> AblateOptions:
        for path, value in self.baseline.items():
            if path not in self.grid:
                raise ValueError(f"baseline names '{path}', which is not in the grid ({', '.join(self.grid)})")
            if _key(value) not in {_key(v) for v in self.grid[path]}:
                raise ValueError(f"baseline {path}: {value!r} is not one of the grid's values {self.grid[path]!r}")
        return self


register_section("ablate", AblateOptions)  # core.sections: `ablate:` is validated at load with this schema
