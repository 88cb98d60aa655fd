"""The house in floors: each floor imports only the floors below it (docs/architecture.md).

import-linter checks the contracts in ``.importlinter`` (the floors, the independent packages on one floor, the
connectors on the public API), every import included -- lazy ones inside functions and those under TYPE_CHECKING --
with no exceptions. These tests run it, show that it fails on a wrong arrow, and keep every package on a floor; and
they run mypy (``mypy.ini``) over the package and show that it fails on a type error.
"""

from __future__ import annotations

import ast
import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "open_rag_eval"
LINT = Path(sys.executable).parent / "lint-imports"
MYPY = Path(sys.executable).parent / "mypy"


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT), "--no-cache", "--no-logo"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


def _floors() -> list[str]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter", encoding="utf-8")
    lines = parser["importlinter:contract:floors"]["layers"].split("\n")
    return [name.strip() for line in lines for name in line.split("|") if name.strip()]


def test_the_import_contracts_are_kept() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter", encoding="utf-8")
    contracts = [name for name in parser.sections() if name.startswith("importlinter:contract:")]
    assert len(contracts) >= 3 and f"Contracts: {len(contracts)} kept, 0 broken." in done.stdout, done.stdout


def test_the_contracts_fail_on_an_arrow_that_runs_up(tmp_path: Path) -> None:
    """A lazy import of the CLI inside a core module, in a copy of the tree: the floors contract names it."""
    for part in ("open_rag_eval", "connectors"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    types = tmp_path / "open_rag_eval" / "core" / "types.py"
    types.write_text(types.read_text(encoding="utf-8") + "\n\ndef _up() -> None:\n"
                     "    from open_rag_eval.cli import main  # noqa: F401\n", encoding="utf-8")
    done = _lint(tmp_path)
    assert done.returncode != 0
    assert "open_rag_eval.core.types -> open_rag_eval.cli" in done.stdout, done.stdout


def test_every_package_is_on_a_floor() -> None:
    """A new package (or root module) joins a floor of the contract, else nothing would check its imports."""
    children = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    children |= {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "_version"}
    placed = {name.removeprefix("open_rag_eval.") for name in _floors()}
    assert sorted(children - placed) == []
    assert sorted(placed - children) == []


def _private_imports(root: Path) -> list[str]:
    """Every import, lazy ones included, of a private name or module (a leading underscore) of one package of
    ``open_rag_eval`` from another package (``_version`` excepted: the version is everyone's)."""
    found = []
    for path in sorted((root / "open_rag_eval").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        package = parts[1] if len(parts) > 2 else parts[-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("open_rag_eval."):
                continue
            target = str(node.module).split(".")[1:]
            private = [p for p in target if p.startswith("_") and not p.startswith("__")]
            names = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            if target[0] != package and target != ["_version"] and (private or names):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.module} {', '.join(names)}".strip())
    return found


def test_no_private_name_is_imported_across_packages(tmp_path: Path) -> None:
    """docs/architecture.md's rule, checked: a package's private names stay its own; and the check fails on one."""
    assert _private_imports(ROOT) == []
    shutil.copytree(PACKAGE, tmp_path / "open_rag_eval", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "open_rag_eval" / "report" / "columns.py"
    target.write_text(target.read_text(encoding="utf-8") + "\n\ndef _peek() -> None:\n"
                      "    from open_rag_eval.run.pipeline import _limit  # noqa: F401\n", encoding="utf-8")
    assert [line.split(": ", 1)[1] for line in _private_imports(tmp_path)] == ["open_rag_eval.run.pipeline _limit"]


# Judge task names that are also other words of the project: there a literal is no task, and only a literal in a
# task's place counts (a request's task, a comparison with a task, a collection of tasks)
SHARED_NAMES = {
    "umbrela": "the metric family and its details section",
    "no_answer": "the metric family and its details section",
    "support": "a nugget assignment label; a diagnosis area",
    "context_relevance": "a generation metric and its details section",
    "rubric": "a generation metric and its details section",
    "answer_relevance": "a generation metric and its details section",
    "criteria": "the evaluator type, its metric family and its details section",
}
_TASK_CALLS = {"chat", "JudgeRequest", "Reply", "Control", "structured_params", "reply_schema", "labels_of",
               "_request", "Item", "_item"}  # calls whose first argument is a judge task
_TASK_NAMES = {"task", "kind"}  # variables holding a judge task


def _name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _in_task_place(tree: ast.AST, tasks: set[str]) -> set[int]:
    """The ids of the string constants of a shared name that stand where a judge task goes: a task call's first
    argument, a side of a comparison with a task variable or a task, a member of a collection holding a task."""
    def taskish(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and _name(node.value) == "Tasks") or (
            isinstance(node, ast.Constant) and node.value in tasks and node.value not in SHARED_NAMES)

    def opened(nodes: list[ast.AST]) -> list[ast.AST]:  # a collection's members, tuples inside opened once
        return [e for n in nodes for e in (n.elts if isinstance(n, (ast.Tuple, ast.List, ast.Set)) else [n])]

    found: set[int] = set()
    for node in ast.walk(tree):
        groups: list[tuple[list[ast.AST], bool]] = []  # (members, whether they stand for tasks whatever else)
        if isinstance(node, ast.Call) and _name(node.func) in _TASK_CALLS and node.args:
            groups.append(([node.args[0]], True))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            groups.append((opened(sides), any(_name(side) in _TASK_NAMES for side in sides)))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            groups.append((list(node.elts), False))
        elif isinstance(node, ast.Dict):
            groups += [([k for k in node.keys if k is not None], False), (opened(list(node.values)), False)]
        for members, forced in groups:
            if forced or any(taskish(m) for m in members):
                found |= {id(m) for m in members if isinstance(m, ast.Constant) and m.value in SHARED_NAMES}
    return found


def _task_literals(root: Path) -> list[str]:
    """Each judge task's name written outside its table (core/judge_tasks.py) in the package, the connectors and
    the benches, docstrings aside: every literal of a name only tasks have, and a shared name's literal standing
    where a task goes."""
    from open_rag_eval.core.judge_tasks import TABLE

    tasks = set(TABLE)
    found = []
    for path in sorted(p for part in ("open_rag_eval", "connectors", "bench") for p in (root / part).rglob("*.py")):
        if path.relative_to(root).as_posix() == "open_rag_eval/core/judge_tasks.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        placed = _in_task_place(tree, tasks)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in tasks and id(node) not in docs \
                    and (node.value not in SHARED_NAMES or id(node) in placed):
                found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}: {node.value}")
    return sorted(found)


def test_each_judge_task_is_named_in_its_table_only(tmp_path: Path) -> None:
    """A judge task's name is written once, in core/judge_tasks.py; everywhere else it is ``Tasks.X``. The check
    fails on a copy of the package with names put back: a name only a task has, a request's task, a comparison
    with a task and a member of a collection of tasks."""
    from open_rag_eval.core.judge_tasks import TABLE

    assert set(SHARED_NAMES) <= set(TABLE)
    assert _task_literals(ROOT) == []
    shutil.copytree(PACKAGE, tmp_path / "open_rag_eval", ignore=shutil.ignore_patterns("__pycache__"))
    back = {"judge/rehearsal.py": "if request.task == Tasks.NUGGET_CREATE:",
            "metrics/umbrela.py": "return JudgeRequest.chat(Tasks.UMBRELA,",
            "health/controls.py": "if c.task == Tasks.SUPPORT and",
            "health/check.py": "Tasks.SUPPORT,\n              Tasks.NO_ANSWER)"}
    for name, line in back.items():
        path = tmp_path / "open_rag_eval" / name
        text = path.read_text(encoding="utf-8")
        assert text.count(line) == 1, (name, line)
        put = line.replace("Tasks.NUGGET_CREATE", '"nugget_create"').replace("Tasks.UMBRELA", '"umbrela"')
        path.write_text(text.replace(line, put.replace("Tasks.SUPPORT", '"support"')), encoding="utf-8")
    found = [entry.split(":")[0] + ":" + entry.split(": ")[1] for entry in _task_literals(tmp_path)]
    assert found == ["open_rag_eval/health/check.py:support", "open_rag_eval/health/controls.py:support",
                     "open_rag_eval/judge/rehearsal.py:nugget_create", "open_rag_eval/metrics/umbrela.py:umbrela"]


def test_no_loose_modules_join_the_package_root() -> None:
    root = {p.stem for p in PACKAGE.glob("*.py")}
    assert root <= {"__init__", "__main__", "_version", "registry", "transport", "testing"}, (
        "a new capability gets its own package (docs/architecture.md), not a module at the root: "
        + ", ".join(sorted(root)))


def _mypy(*files: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([str(MYPY), "--config-file", str(ROOT / "mypy.ini"), "--cache-dir",
                           str(ROOT / ".mypy_cache"), *files], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1200)


@pytest.mark.timeout(1200)  # a first run (no .mypy_cache yet) checks every module: minutes on a loaded machine
def test_the_package_type_checks() -> None:
    done = _mypy()
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Success: no issues found")


def test_the_type_check_fails_on_a_type_error(tmp_path: Path) -> None:
    """A wrong return type and a pydantic model given a field it does not have (the plugin's check)."""
    bad = tmp_path / "bad.py"
    bad.write_text("from open_rag_eval.core.types import Passage\n\n\n"
                   "def first_id() -> int:\n    return Passage(id='p1', text='t').id\n\n\n"
                   "def passage() -> Passage:\n    return Passage(id='p1', text='t', colour='red')\n", encoding="utf-8")
    done = _mypy(str(bad))
    assert done.returncode == 1, done.stdout
    assert 'Incompatible return value type (got "str", expected "int")' in done.stdout
    assert 'Unexpected keyword argument "colour" for "Passage"' in done.stdout


RUN_FUNCTION_LINES = 60  # issue 36: the run's centre stays a composition of short functions


def _long_functions(folder: Path, limit: int) -> list[str]:
    """Every function (methods and nested ones included) of the modules in ``folder`` longer than ``limit`` lines,
    decorators and docstring included."""
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if (node.end_lineno or node.lineno) - first + 1 > limit:
                    found.append(f"{path.name}:{node.name}")
    return found


def test_no_function_in_run_is_over_60_lines(tmp_path: Path) -> None:
    """``run/`` (the one run loop, ``arun`` included) has no function over 60 lines; and the check fails on one."""
    assert _long_functions(PACKAGE / "run", RUN_FUNCTION_LINES) == []
    long = tmp_path / "long.py"
    long.write_text("def long() -> int:\n    x = 0\n" + "    x += 1\n" * 58 + "    return x\n", encoding="utf-8")
    assert _long_functions(tmp_path, RUN_FUNCTION_LINES) == ["long.py:long"]
    long.write_text("def short() -> int:\n    x = 0\n" + "    x += 1\n" * 57 + "    return x\n", encoding="utf-8")
    assert _long_functions(tmp_path, RUN_FUNCTION_LINES) == []


# The only attribute probes run/ and executors/ make, each on something that is not an evaluator: the judge client
# (its counters, first request, timing), a source, a connector, an error's cause. What an evaluator can do is read
# from its contract (evaluators/base.py), never probed; a new probe fails below until it is reviewed here.
PROBES_ALLOWED = {
    ("executors/array.py", "accounting"), ("executors/cluster.py", "cause"), ("executors/relay.py", "cause"),
    ("executors/shards.py", "accounting"),
    ("run/evaluation.py", "contiguous"), ("run/fetch.py", "PATH_OPTIONS"), ("run/fetch.py", "options"),
    ("run/fetch.py", "concurrency"), ("run/loop.py", "timing"), ("run/loop.py", "accounting"),
    ("run/manifest.py", "accounting"), ("run/manifest.py", "prompts"), ("run/session.py", "accounting"),
    ("run/start.py", "asked"), ("run/workload.py", "pending"), ("run/workload.py", "accounting"),
}


def _probes(package: Path) -> set[tuple[str, str]]:
    """(module, attribute) of every ``getattr`` / ``hasattr`` / ``setattr`` call and ``inspect`` import in run/ and
    executors/ (an attribute that is not a literal: ``?``)."""
    found = set()
    for folder in ("run", "executors"):
        for path in sorted((package / folder).glob("*.py")):
            name = f"{folder}/{path.name}"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    found |= {(name, "import inspect") for m in modules if m.split(".")[0] == "inspect"}
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                        "getattr", "hasattr", "setattr") and len(node.args) >= 2:
                    attribute = node.args[1]
                    literal = isinstance(attribute, ast.Constant) and isinstance(attribute.value, str)
                    found.add((name, str(attribute.value) if literal else "?"))
    return found


def test_run_and_executors_never_probe_an_evaluator(tmp_path: Path) -> None:
    """No getattr/hasattr/setattr/inspect on an evaluator in run/ or executors/ (its contract says what it can do);
    and the check fails on a copy that probes one (the shards' nugget lists, as they once were read)."""
    assert sorted(_probes(PACKAGE) - PROBES_ALLOWED) == []
    for folder in ("run", "executors"):
        shutil.copytree(PACKAGE / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shards = tmp_path / "executors" / "shards.py"
    shards.write_text(shards.read_text(encoding="utf-8") + "\n\ndef _lists(e: object) -> object:\n"
                      "    return getattr(e, 'nugget_lists', None) or hasattr(e, 'reask_bounds')\n", encoding="utf-8")
    (tmp_path / "run" / "peek.py").write_text("import inspect\n", encoding="utf-8")
    assert sorted(_probes(tmp_path) - PROBES_ALLOWED) == [
        ("executors/shards.py", "nugget_lists"), ("executors/shards.py", "reask_bounds"),
        ("run/peek.py", "import inspect")]


# The only attributes run/ and executors/ assign on something other than ``self``, none on an evaluator: a plan's
# windows, Ray's data context, the relay's judge transport, the remote limiter's window and bucket, a health report's
# counts, the progress record. An evaluator is handed what it takes through its contract (``Contract.kept``'s
# restore, ``Contract.model_scores``); a new assignment fails below until it is reviewed here.
ASSIGNMENTS_ALLOWED = {
    ("executors/array.py", "windows"), ("executors/models.py", "enable_progress_bars"),
    ("executors/relay.py", "transport"), ("executors/remote.py", "limit"), ("executors/remote.py", "maximum"),
    ("executors/remote.py", "rate"), ("executors/remote.py", "capacity"), ("executors/remote.py", "_level"),
    ("run/loop.py", "low_labelled"), ("run/loop.py", "n_cited_outputs"), ("run/pipeline.py", "stages"),
    ("run/pipeline.py", "outputs_total"), ("run/pipeline.py", "judge"),
}


def _assignments(package: Path) -> set[tuple[str, str]]:
    """(module, attribute) of every attribute assigned (``=``, ``+=``, annotated) on anything but ``self`` in run/
    and executors/."""
    found = set()
    for folder in ("run", "executors"):
        for path in sorted((package / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
                found |= {(f"{folder}/{path.name}", part.attr) for target in targets for part in ast.walk(target)
                          if isinstance(part, ast.Attribute) and isinstance(part.ctx, ast.Store)
                          and not (isinstance(part.value, ast.Name) and part.value.id == "self")}
    return found


def test_run_and_executors_never_assign_an_evaluator_attribute(tmp_path: Path) -> None:
    """No attribute of an evaluator set from run/ or executors/ (what it takes goes through its contract); and the
    check fails on a copy that sets one (the model stage's BERTScore, as it once was handed over)."""
    assert sorted(_assignments(PACKAGE) - ASSIGNMENTS_ALLOWED) == []
    for folder in ("run", "executors"):
        shutil.copytree(PACKAGE / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shards = tmp_path / "executors" / "shards.py"
    shards.write_text(shards.read_text(encoding="utf-8") + "\n\ndef _hand(evaluators: list[object]) -> None:\n"
                      "    evaluators[1].bertscored = None\n    for e in evaluators:\n        e.calls += 1\n"
                      "    a, (b.uncited, c) = 1, (2, 3)\n", encoding="utf-8")
    assert sorted(_assignments(tmp_path) - ASSIGNMENTS_ALLOWED) == [
        ("executors/shards.py", "bertscored"), ("executors/shards.py", "calls"), ("executors/shards.py", "uncited")]
