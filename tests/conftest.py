"""Fixtures shared by several test modules."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

RESULTS_FIXTURE = Path(__file__).parent / "data" / "results_fixture"


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A fresh copy of the fixture run's results folder (results.json, results.csv, manifest)."""
    directory = tmp_path / "results"
    shutil.copytree(RESULTS_FIXTURE, directory)
    return directory
