"""One exception tree. The library raises; only the CLI prints and chooses exit codes.

    OpenRagEvalError
    ├── ConfigError          bad config: YAML path + problem                        (exit 2)
    ├── InputError           bad input: file, line, field + problem                  (exit 3)
    ├── MissingDependency    an optional extra is not installed: says what to install (exit 2)
    ├── ModelUnavailable     local model weights not found: says where to put them
    ├── StorageError         a file, folder or database cannot be used: names the path and what to do (exit 5)
    ├── RunIncomplete        part of the run was lost (a Ray shard); nothing written, re-running resumes (exit 6)
    ├── Inconclusive         a gate's test cannot tell (too few queries, a drop it cannot confirm)  (exit 7)
    └── JudgeError
        ├── JudgeCallError   one judge call failed after its retries -> a failed judgment, never a number
        └── JudgeUnavailable the endpoint is down or refuses us (auth)               (exit 4)
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "EXIT_INCONCLUSIVE",
    "Inconclusive",
    "InputError",
    "JudgeCallError",
    "JudgeError",
    "JudgeUnavailable",
    "MissingDependency",
    "ModelUnavailable",
    "OpenRagEvalError",
    "RunIncomplete",
    "StorageError",
    "exit_code",
]


class OpenRagEvalError(Exception):
    """Base of every error the project raises on purpose."""


class ConfigError(OpenRagEvalError):
    def __init__(self, problem: str, *, path: str = "", file: str = "") -> None:
        self.problem, self.path, self.file = problem, path, file
        where = ": ".join(part for part in (file, path) if part)
        super().__init__(f"{where}: {problem}" if where else problem)


class InputError(OpenRagEvalError):
    def __init__(self, problem: str, *, file: str = "", line: int | None = None, field: str = "") -> None:
        self.problem, self.file, self.line, self.field = problem, file, line, field
        where = file + (f":{line}" if line is not None else "")
        if field:
            where = f"{where}: field '{field}'" if where else f"field '{field}'"
        super().__init__(f"{where}: {problem}" if where else problem)


class MissingDependency(OpenRagEvalError):
    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"'{module}' is not installed; install it with: pip install 'open-rag-eval-trec[{extra}]' "
                         f"(in a checkout: pip install -e '.[{extra}]')")


class ModelUnavailable(OpenRagEvalError):
    """Local model weights cannot be found; the message says where to put them."""


class StorageError(OpenRagEvalError):
    """A file, folder or SQLite database cannot be read or written; the message names the path and what to do."""

    def __init__(self, problem: str, *, path: str | object = "") -> None:
        self.problem, self.path = problem, str(path)
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


class RunIncomplete(OpenRagEvalError):
    """Part of the run could not be evaluated (a Ray shard whose worker died for good): no results are written,
    everything judged is in the cache, and the message says how to resume."""


EXIT_INCONCLUSIVE = 7  # every command: a gate whose test cannot tell (compare, sweep, the pytest gate's exception)


class Inconclusive(OpenRagEvalError):
    """A gate could not tell: a drop beyond what is allowed that the paired test cannot confirm (too few queries,
    not significant). Never a pass; ``verdicts`` holds each gated metric's ``scoring.verdict.Verdict``."""

    def __init__(self, message: str, verdicts: list[object] | None = None) -> None:
        super().__init__(message)
        self.verdicts = list(verdicts or [])


class JudgeError(OpenRagEvalError):
    """Base of judge failures."""


class JudgeCallError(JudgeError):
    """One judge call failed for good (after retries, or on a non-retryable reply).

    ``refused``: the judge model declined in words (a refusal). Like every other failure it is a missing value
    with its reason, never a grade; the flag only tells a refusal from a failed call.
    """

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class JudgeUnavailable(JudgeError):
    """The judge endpoint is unusable (sustained outage, authentication): the run stops, keeping judged work."""


def exit_code(error: BaseException) -> int:
    if isinstance(error, (ConfigError, MissingDependency)):
        return 2
    if isinstance(error, InputError):
        return 3
    if isinstance(error, JudgeUnavailable):
        return 4
    if isinstance(error, StorageError):
        return 5
    if isinstance(error, RunIncomplete):
        return 6
    if isinstance(error, Inconclusive):
        return EXIT_INCONCLUSIVE
    return 1
