"""Profiles: a named set of metric variants, parameters and prompt versions (docs/profiles.md).

A profile gives an evaluator's options their defaults. ``profile: vectara`` on a ``trec``, ``consistency`` or
``generation`` evaluator -- or once at the top of a config, for every evaluator -- fills each option the config leaves out with the
profile's value; an option written in the config always wins, so a profile is a starting point, never a lock. The
evaluators and metrics never ask which profile they run under: they read their options. ``trec2024`` (the TREC 2024
RAG Track's methods) is the default and sets nothing.

Profiles:

``trec2024``  the published TREC 2024 methods (castorini's umbrela and nuggetizer, the organisers' support script).
``vectara``   vectara's open-rag-eval's own definitions, so a team migrating from it can compare old and new numbers.
``rag_guide`` the RAG evaluation & optimisation guide's own LLM-judged definitions (its RAGAS-style evaluator): the
              generation evaluator judges ``metrics: [rag_guide]`` (columns ``rag_guide.*``); it sets nothing else.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["DEFAULT", "PROFILES", "Profile", "ProfileName", "apply", "get", "merged"]

ProfileName = Literal["trec2024", "vectara", "rag_guide"]
DEFAULT: ProfileName = "trec2024"


@dataclass(frozen=True)
class Profile:
    """A profile: per evaluator type, the defaults it gives that evaluator's options (nested like the YAML)."""

    name: str
    summary: str
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def defaults(self, evaluator: str) -> dict[str, Any]:
        return copy.deepcopy(dict(self.options.get(evaluator, {})))


def _profiles() -> dict[str, Profile]:
    from open_rag_eval.profiles.vectara import VECTARA  # noqa: PLC0415 (data module; keeps this one small)

    trec2024 = Profile("trec2024", "the TREC 2024 RAG Track's published methods (the default)")
    # the guide's definitions are their own metric of the generation evaluator (open_rag_eval.metrics.rag_guide)
    rag_guide = Profile("rag_guide", "the RAG evaluation & optimisation guide's own LLM-judged definitions",
                        {"generation": {"metrics": ["rag_guide"]}})
    return {profile.name: profile for profile in (trec2024, VECTARA, rag_guide)}


PROFILES: dict[str, Profile] = _profiles()


def get(name: str) -> Profile:
    """The profile ``name``; a ValueError lists the valid names."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile '{name}'; valid: {', '.join(PROFILES)}")
    return PROFILES[name]


def merged(defaults: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` over ``defaults``: nested mappings merge key by key, anything else given replaces the default."""
    result = dict(defaults)
    for key, value in given.items():
        below = result.get(key)
        result[key] = merged(below, value) if isinstance(below, Mapping) and isinstance(value, Mapping) else value
    return result


def apply(evaluator: str, data: Any) -> Any:
    """The options ``data`` of an evaluator of type ``evaluator`` with its profile's defaults filled in (the body of
    the options models' "before" validators). Data that is not a mapping is left to the model to refuse."""
    if not isinstance(data, Mapping):
        return data
    name = data.get("profile", DEFAULT)
    if not isinstance(name, str) or name not in PROFILES:
        return data  # the model's ``profile`` field refuses it, naming the valid profiles
    return merged(PROFILES[name].defaults(evaluator), data)
