"""Guards on what a config may contain, before and after validation.

- ``load_yaml``: YAML with a budget. Aliases may be used, but at most ``MAX_ALIASES`` of them, expanding to at most
  ``MAX_VALUES`` values and ``MAX_DEPTH`` levels in all; an anchor that contains itself is refused. A 600-byte
  "billion laughs" document therefore fails in milliseconds instead of expanding in memory.
- ``check_evaluators``: an evaluator listed twice (its values would be counted twice) and a sweep threshold naming
  a metric no listed evaluator produces (it would never be checked, or flag a false regression) are refused.
- ``check_numbers``: every number in a validated config is finite and of a sane size (``.inf``, ``.nan``, ``1e999``
  and the strings ``"inf"``/``"nan"`` all end here), naming the YAML path.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from open_rag_eval.core.errors import ConfigError

__all__ = ["LARGEST_NUMBER", "MAX_ALIASES", "MAX_DEPTH", "MAX_VALUES", "check_evaluators", "check_numbers",
           "load_yaml", "pick_error"]

MAX_ALIASES = 256  # alias uses (*name) per document
MAX_VALUES = 100_000  # scalars, lists and mappings once every alias is expanded
MAX_DEPTH = 64  # nesting levels once every alias is expanded
LARGEST_NUMBER = 1e15  # no setting has a sane value beyond this (prices, rates, counts, seconds)


class _Refused(yaml.YAMLError):
    def __init__(self, problem: str, mark: yaml.Mark | None) -> None:
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark


class BudgetComposer:
    """Mixed into a loader (before ``yaml.SafeLoader``): counts aliases and checks the document's expansion."""

    _aliases = 0
    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):  # type: ignore[attr-defined]
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Refused(f"more than {MAX_ALIASES} aliases (*name) in one document",
                               self.peek_event().start_mark)  # type: ignore[attr-defined]
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[attr-defined]
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)  # type: ignore[misc]
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        self.get_event()  # type: ignore[attr-defined]  # DOCUMENT-START
        node = self.compose_node(None, None)
        known: dict[str, yaml.Node] = self.anchors  # type: ignore[has-type]
        anchors = {id(anchored): name for name, anchored in known.items()}
        check_expansion(node, anchors)
        self.get_event()  # type: ignore[attr-defined]  # DOCUMENT-END
        self.anchors: dict[str, yaml.Node] = {}
        return node


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def check_expansion(root: yaml.Node, anchors: Mapping[int, str]) -> None:
    """Refuse a node graph that contains itself or expands beyond the budget (iterative: no recursion limit)."""
    sizes: dict[int, tuple[int, int]] = {}  # id -> (values, depth) once expanded
    visiting: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            parts = [sizes[id(child)] for child in _children(node)]
            values = 1 + sum(size for size, _ in parts)
            depth = 1 + max((level for _, level in parts), default=0)
            visiting.discard(key)
            if values > MAX_VALUES:
                raise _Refused(f"aliases expand to more than {MAX_VALUES:,} values", node.start_mark)
            if depth > MAX_DEPTH:
                raise _Refused(f"aliases expand to more than {MAX_DEPTH} levels of nesting", node.start_mark)
            sizes[key] = (values, depth)
            continue
        if key in sizes:
            continue
        if key in visiting:
            name = anchors.get(key)
            label = f"the anchor &{name}" if name else "an anchor"
            raise _Refused(f"{label} contains itself (a recursive alias)", node.start_mark)
        visiting.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in visiting:
                name = anchors.get(id(child))
                label = f"the anchor &{name}" if name else "an anchor"
                raise _Refused(f"{label} contains itself (a recursive alias)", child.start_mark)
            if id(child) not in sizes:
                stack.append((child, False))


def load_yaml(text: str, loader: type[Any], file: str) -> Any:
    """Parse one YAML document with ``loader`` (which must mix in ``BudgetComposer``); ``ConfigError`` on any
    problem, naming the line."""
    try:
        instance = loader(text)
        try:
            return instance.get_single_data()
        finally:
            instance.dispose()
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{file}:{mark.line + 1}" if mark is not None else file
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(f"invalid YAML: {problem}", file=where) from None
    except RecursionError:
        raise ConfigError(f"invalid YAML: nested deeper than {MAX_DEPTH} levels", file=file) from None


def check_numbers(value: Any, path: str, file: str) -> None:
    """Raise ``ConfigError`` at the first number that is not finite or is absurdly large (models, dicts, lists)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        if isinstance(item, float) and not math.isfinite(item):
            raise ConfigError(f"must be a finite number (got {item})", path=where, file=file)
        if isinstance(item, (int, float)):
            if abs(item) > LARGEST_NUMBER:
                raise ConfigError(f"out of range (got {item:g}; at most {LARGEST_NUMBER:g})", path=where, file=file)
            continue
        if isinstance(item, BaseModel):
            entries = [(name, getattr(item, name)) for name in type(item).model_fields]
        elif isinstance(item, Mapping):
            entries = list(item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed([(part, f"{where}[{i}]") for i, part in enumerate(item)]))
            continue
        else:
            continue
        stack.extend(reversed([(part, f"{where}.{name}" if where else str(name)) for name, part in entries]))


def check_evaluators(specs: Sequence[Any], sweep: Any, file: str) -> None:
    """``specs``: the validated ``EvaluatorSpec`` list, in config order; ``sweep``: the ``sweep:`` section or None."""
    first: dict[type, int] = {}
    for i, spec in enumerate(specs):
        if spec.cls in first:
            raise ConfigError(f"the evaluator '{spec.type}' is listed twice (also evaluators[{first[spec.cls]}]): "
                              "its values would be counted twice; give it once, with all its options",
                              path=f"evaluators[{i}]", file=file)
        first[spec.cls] = i
    for i, spec in enumerate(specs):
        if "criteria" in (getattr(spec.options, "retest", None) or ()) and getattr(spec.options, "judge_repeats", 1) > 1 \
                and not any(s.type == "criteria" for s in specs[:i]):
            raise ConfigError("retest: [criteria] re-judges the run's criteria: list a type: criteria evaluator "
                              "before this one", path=f"evaluators[{i}].retest", file=file)
    from open_rag_eval.core.catalogue import declared  # noqa: PLC0415

    names: list[str] | None = []
    for spec in specs:
        produced = spec.cls.metric_names(spec.options, names) if hasattr(spec.cls, "metric_names") else None
        if produced is None:  # an evaluator that cannot say what it produces: the catalogue's names are checked
            names = None
            break
        names += produced
    for section in ("thresholds", "fail_if_drop"):
        for metric in getattr(sweep, section, None) or {}:
            if names is None:
                if not declared(metric):
                    raise ConfigError(f"'{metric}' is no metric name (docs/RESULTS.md lists them)",
                                      path=f"sweep.{section}.{metric}", file=file)
            elif metric not in names:
                close = difflib.get_close_matches(metric, names, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                raise ConfigError(f"no evaluator in this config produces '{metric}'; {hint}valid names: "
                                  f"{', '.join(names)}", path=f"sweep.{section}.{metric}", file=file)


def _model_names() -> set[str]:
    names, stack = set(), list(BaseModel.__subclasses__())
    while stack:
        cls = stack.pop()
        names.add(cls.__name__)
        stack.extend(cls.__subclasses__())
    return names


def pick_error(errors: Sequence[Any]) -> dict[str, Any]:
    """The error to report from pydantic's list, its ``loc`` without union branch tags (``Price``,
    ``dict[str,Price]``): for a value matching no branch of a union, the branch that got furthest."""
    models = _model_names()

    def plain(loc: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(part for part in loc if not (isinstance(part, str) and ("[" in part or part in models)))

    tagged = any(plain(e["loc"]) != tuple(e["loc"]) for e in errors)
    chosen = max(errors, key=lambda e: len(plain(e["loc"]))) if tagged else errors[0]
    return {**chosen, "loc": plain(chosen["loc"])}


def config_error(error: ValidationError, model: type[BaseModel], file: str, prefix: str = "") -> ConfigError:
    errors = error.errors()
    unknown = [e for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]  # a top-level typo: the
    # likely cause of the others (a required section then missing)
    first = pick_error(unknown or errors)  # a union's branches report one error each: the one that got furthest
    parts = [prefix] if prefix else []
    for loc in first["loc"]:
        parts.append(f"[{loc}]" if isinstance(loc, int) else f".{loc}" if parts else str(loc))
    path = "".join(parts).lstrip(".")
    problem = first["msg"]
    if first["type"] == "extra_forbidden":
        valid = _valid_keys(model, first["loc"][:-1])
        problem = f"unknown key{nearest(str(first['loc'][-1]), valid)}; valid keys here: {', '.join(valid)}"
    elif first["type"] == "literal_error":
        problem = f"{problem} (got {first.get('input')!r})"
    more = len(error.errors()) - 1
    return ConfigError(problem + (f" (and {more} more problem{'s' * (more > 1)})" if more else ""), path=path, file=file)


def nearest(name: str, valid: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the valid name closest to ``name`` (``evaluator`` -> ``evaluators``); empty
    when none is close."""
    import difflib

    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _valid_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names of the (sub)model at ``loc``."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        info = getattr(current, "model_fields", {}).get(part)
        if info is None:
            return []
        current = _model_of(info.annotation)
    return sorted(getattr(current, "model_fields", {}))


def _model_of(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None
