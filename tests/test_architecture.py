"""The package's imports go one way: the core never imports the edges that are built on it.

The core (data types, config, judge, metrics, scoring, evaluators, inputs, store, report, pipeline) is what every
way of running open-rag-eval shares; the edges (the CLI, the Python API, sweeps, connectors, tracking backends, the
service, executors, …) are built on it. An edge may import the core and other edges; the core imports only the core,
so that each edge can be read, tested and removed on its own. ``docs/architecture.md`` draws the map.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "open_rag_eval"

EDGES = {"cli", "api", "testing", "service", "executors", "sweeps", "calibration", "generation", "tracking",
         "connectors", "ablation", "__main__"}

# the few places where the core reaches an edge module on purpose
ALLOWED = {

    ("config", "open_rag_eval.tracking.options"),  # the schema of the config's tracking: section
    ("config", "open_rag_eval.ablation.options"),  # the schema of the config's ablate: section
    ("run.checks", "open_rag_eval.sweeps.history"),  # validate checks every database we keep, the history too
}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(source: str) -> Iterator[tuple[int, str]]:
    """(line, name) for every import in ``source``, lazy ones inside functions too."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)


def _edge(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "open_rag_eval" and len(parts) > 1 and parts[1] in EDGES else None


def test_the_core_never_imports_an_edge() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        if module.split(".")[0] in EDGES:
            continue
        for line, name in _imports(path.read_text(encoding="utf-8")):
            if _edge(name) and not any(module.startswith(m) and name.startswith(t) for m, t in ALLOWED):
                found.append(f"open_rag_eval/{path.relative_to(PACKAGE).as_posix()}:{line} imports {name}")
    assert not found, "the core imports an edge (see docs/architecture.md):\n" + "\n".join(sorted(set(found)))


def test_no_loose_modules_join_the_package_root() -> None:
    root = {p.stem for p in PACKAGE.glob("*.py")}
    assert root <= {"__init__", "__main__", "_version", "registry", "transport", "testing"}, (
        "a new capability gets its own package (docs/architecture.md), not a module at the root: "
        + ", ".join(sorted(root)))


def test_the_check_sees_lazy_and_plain_edge_imports() -> None:
    source = "def f():\n    from open_rag_eval.cli.terminal import echo\nimport open_rag_eval.service.app\n" \
             "from open_rag_eval import types\n"
    assert [(line, _edge(name)) for line, name in _imports(source) if _edge(name)] == [
        (3, "service"), (2, "cli"), (2, "cli")]
