"""Sections of a config that belong to a package built on the config (``tracking:``, ``diagnosis:``, ``ablate:``).

The config knows such a section's name; its schema is its owner's. The owner registers the schema
(``register_section``) when its options module is imported. The entry points either import the owners before they
load a config (the Python API, the service) or name them (``register_owner``, the CLI: an owner is then imported
only by a config that has its section, so a run without one never pays for the owner's import before its first
judge request). Either way a bad section fails at load like every other one, its YAML path named.
``LoadedConfig.section(name, schema)`` gives the owner its validated options (validated then, if the schema was
not registered at load).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # no pydantic at import: the CLI names the owners before its first judge request is out
    from pydantic import BaseModel

__all__ = ["SECTIONS", "register_owner", "register_section", "registered", "schema_of"]

SECTIONS = ("tracking", "diagnosis", "ablate")  # the names; the schemas are registered by their owners
_SCHEMAS: dict[str, type[BaseModel]] = {}
_OWNERS: dict[str, str] = {}  # a section's name -> its owner's options module, named by an entry point


def register_section(name: str, schema: type[BaseModel]) -> None:
    _check(name)
    _SCHEMAS[name] = schema


def register_owner(name: str, module: str) -> None:
    """``module`` (its import name) registers the schema of section ``name`` when imported: imported by
    ``schema_of`` when a config has that section."""
    _check(name)
    _OWNERS[name] = module


def registered() -> dict[str, type[BaseModel]]:
    return dict(_SCHEMAS)


def schema_of(name: str) -> type[BaseModel] | None:
    """The schema registered for section ``name``, its owner imported first if an entry point named it."""
    if name not in _SCHEMAS and name in _OWNERS:
        importlib.import_module(_OWNERS[name])
    return _SCHEMAS.get(name)


def _check(name: str) -> None:
    if name not in SECTIONS:
        raise ValueError(f"'{name}' is not a config section an owner registers; those are: {', '.join(SECTIONS)}")
