"""The top-level ``connectors`` package: shipped in the wheel beside ``open_rag_eval``, and refused by name when
another distribution's ``connectors`` shadows it (docs/architecture.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from open_rag_eval.core.errors import ConfigError
from open_rag_eval.registry import resolve

ROOT = Path(__file__).resolve().parent.parent


def _forget_connectors(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "connectors" or m.startswith("connectors.")]:
        monkeypatch.delitem(sys.modules, name)


def _foreign_package(root: Path) -> None:
    """Another distribution's ``connectors``: it even has an ``http`` module with an ``HttpConnector``."""
    package = root / "connectors"
    package.mkdir()
    (package / "__init__.py").write_text('"""Connectors of some other project."""\n', encoding="utf-8")
    (package / "http.py").write_text("class HttpConnector:\n    pass\n", encoding="utf-8")


def test_a_built_in_connector_is_ours() -> None:
    import connectors
    from connectors.http import HttpConnector

    assert connectors.OPEN_RAG_EVAL is True
    assert resolve("connector", "http", path="connector.type") is HttpConnector


def test_another_distributions_connectors_package_is_refused_by_name(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _foreign_package(tmp_path)
    _forget_connectors(monkeypatch)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="another distribution .* shadows it") as caught:
        resolve("connector", "http", path="connector.type")
    assert caught.value.path == "connector.type"
    assert str(tmp_path) not in str(caught.value)  # no server path in a message a service client may see
    assert "connectors.http" not in sys.modules  # refused before the foreign module was imported


def test_a_users_own_module_class_is_not_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``module:Class`` names the user's own code, whatever package it lives in."""
    _foreign_package(tmp_path)
    _forget_connectors(monkeypatch)
    monkeypatch.syspath_prepend(str(tmp_path))
    found = resolve("connector", "connectors.http:HttpConnector", path="connector.type")
    assert found.__module__ == "connectors.http" and not hasattr(sys.modules["connectors"], "OPEN_RAG_EVAL")


def test_the_wheel_ships_the_connectors_package() -> None:
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    assert 'find_packages(include=["open_rag_eval", "open_rag_eval.*", "connectors"])' in setup
    assert (ROOT / "connectors" / "__init__.py").is_file()
