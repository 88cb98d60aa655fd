"""Sections of a config that belong to a package built on the config (``tracking:``, ``ablate:``, ``diagnosis:``).

The config knows such a section's name; its schema is its owner's. The owner registers the schema
(``register_section``) when its options module is imported, and the entry points import the owners before they
load a config (the CLI, the Python API, the service), so a bad section fails at load like every other one, its
YAML path named. ``LoadedConfig.section(name, schema)`` gives the owner its validated options (validated then, if
the schema was not registered at load).
"""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["SECTIONS", "register_section", "registered"]

SECTIONS = ("tracking", "diagnosis", "ablate")  # the names; the schemas are registered by their owners
_SCHEMAS: dict[str, type[BaseModel]] = {}


def register_section(name: str, schema: type[BaseModel]) -> None:
    if name not in SECTIONS:
        raise ValueError(f"'{name}' is not a config section an owner registers; those are: {', '.join(SECTIONS)}")
    _SCHEMAS[name] = schema


def registered() -> dict[str, type[BaseModel]]:
    return dict(_SCHEMAS)
