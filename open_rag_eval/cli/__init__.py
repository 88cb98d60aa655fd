"""The command line: ``open-rag-eval COMMAND ...``.

Each command lives in ``open_rag_eval/cli/commands/<name>.py`` and defines ``HELP``, ``add_arguments(parser)``
and ``run(args) -> int``. Command modules import heavy libraries only inside ``run``. The library raises;
this module alone turns errors into one line on stderr and an exit code (see ``errors.exit_code``).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import importlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from open_rag_eval._version import __version__
from open_rag_eval.core.errors import JudgeUnavailable, OpenRagEvalError, StorageError, exit_code
from open_rag_eval.core.redaction import redact
from open_rag_eval.cli.terminal import ConsoleFilter, excepthook

__all__ = ["error_line", "main"]

COMMANDS = ("eval", "validate", "plot", "compare", "report", "sweep", "history", "simulate-judge", "calibrate",
            "generate-queries", "merge", "serve", "worker", "ablate")

log = logging.getLogger("open_rag_eval")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="open-rag-eval", description="Evaluate RAG systems with LLM judges (TREC 2024 RAG methods)."
    )
    parser.add_argument("--version", action="version", version=f"open-rag-eval {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"open_rag_eval.cli.commands.{name.replace('-', '_')}")
        # help= is %-formatted by argparse ("95%%" prints 95%), a description is printed as written
        command = sub.add_parser(name, help=module.HELP, description=module.HELP.replace("%%", "%"))
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def _setup_logging(verbose: bool, quiet: bool) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, format="%(message)s", stream=sys.stderr)
    for handler in logging.getLogger().handlers:  # every record is redacted and made printable before it is shown
        if not any(isinstance(f, ConsoleFilter) for f in handler.filters):
            handler.addFilter(ConsoleFilter())
    sys.excepthook = excepthook  # a crash's traceback too
    for noisy in ("httpx", "httpx2", "openai", "urllib3", "filelock", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def register_sections() -> None:
    """The config sections whose schemas live in the packages built on the config (``core.sections``): their owners
    named before a command loads a config, so a bad ``tracking:``, ``diagnosis:`` or ``ablate:`` section fails at
    load; an owner is imported only by a config that has its section (none before a plain run's first request)."""
    from open_rag_eval.core.sections import register_owner  # noqa: PLC0415

    for name, owner in (("ablate", "ablation"), ("diagnosis", "diagnosis"), ("tracking", "tracking")):
        register_owner(name, f"open_rag_eval.{owner}.options")


def error_line(error: BaseException, cached: bool | str = True) -> str:
    """The one line a user error prints: line breaks inside quoted user values (ids, cells) are escaped.
    ``cached``: what the run's judge keeps for a re-run (``judge_kept``)."""
    line = "error: " + "\\n".join(redact(str(error)).splitlines())
    if isinstance(error, JudgeUnavailable):
        hint = resume_hint(cached)
        if cached is True and any(words in str(error) for words in _SETTING_NAMED):  # the run stops until it changes
            hint = hint.replace("; re-run", "; once that is set, re-run")
        line += f" ({hint})"
    return line


_SETTING_NAMED = ("set judge.", "check judge.", "check the key")  # a refusal that names what to change


def judge_kept(judge: Any) -> bool | str:
    """What a stopped run leaves to resume from: True when the judge cache keeps every reply, else why it does not
    (``judge.cache: false``; ``judge.record`` and ``judge.replay`` turn the cache off)."""
    if judge.replay is not None:
        return "judge.replay answers from its file (the cache is off), so a re-run replays it again"
    if judge.record is not None:
        return "judge.record turns the cache off (the exchanges so far are in the recording), so a re-run judges " \
               "everything again"
    return judge.cache is not False


def resume_hint(cached: bool | str) -> str:
    """What a re-run of a stopped run does: resume from the cache, or judge everything again."""
    if cached is True:
        return "everything judged so far is kept in the cache; re-run the same command to resume"
    if isinstance(cached, str):
        return f"nothing judged was kept in the cache: {cached}"
    return "nothing judged was kept: judge.cache is false, so a re-run judges everything again"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Called without ``argv`` (the ``open-rag-eval`` program itself), an ``eval`` ends the
    process as soon as its files are written and its output flushed (see ``_end_process``)."""
    if argv is None:  # the program itself: its config schemas need no pydantic plugin (see ``PLUGINS_OFF``)
        os.environ.setdefault(*PLUGINS_OFF)
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    _setup_logging(args.verbose, args.quiet)
    args.whole_process = argv is None  # the program itself: the process is the command's alone
    code = _run(args)
    if argv is None and args.command in QUICK_EXIT:
        _end_process(code)
    return code


# pydantic looks its plugins up in every installed package's entry points when it builds its first schema: 11-18 ms
# of CPU before a run's first judge request (200 installed packages), for plugins (observability hooks) that have
# nothing to watch in the command's own config schemas. The program turns them off unless the environment says
# otherwise (an empty PYDANTIC_DISABLE_PLUGINS keeps them on)
PLUGINS_OFF = ("PYDANTIC_DISABLE_PLUGINS", "__all__")
QUICK_EXIT = frozenset({"eval"})  # commands whose work is all done, written and closed when they return


@contextlib.contextmanager
def loading(whole_process: bool) -> Iterator[None]:
    """Python's cyclic collector off while a command imports its modules and loads its config: long-lived objects
    by the hundred thousand (modules, classes, schemas), scanned again and again for nothing. On leaving, in the
    program's own process (``whole_process``), what was loaded is moved out of the collector's sight
    (``gc.freeze``), so the run's collections, and the full one before its report, scan only the run's objects."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if whole_process:
            gc.freeze()
        if enabled:
            gc.enable()


def _end_process(code: int) -> NoReturn:
    """Skip the interpreter's teardown (freeing every object of a large run one by one, module by module): the
    results are written atomically and every file, database and connection was closed when the command
    returned. Exit handlers still run, and logs and standard streams are flushed first."""
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _run(args: argparse.Namespace) -> int:
    try:
        register_sections()
        return int(args._run(args) or 0)
    except OpenRagEvalError as error:
        log.error("%s", error_line(error, getattr(args, "judge_cached", True)))
        return exit_code(error)
    except OSError as error:  # a file problem no command turned into its own message: still one line, exit 5
        where = f"{error.filename}: " if error.filename else ""
        log.error("%s", error_line(StorageError(f"{where}{error.strerror or error}")))
        return 5
    except KeyboardInterrupt:
        log.error("interrupted; %s", resume_hint(getattr(args, "judge_cached", True)))
        return 130


if __name__ == "__main__":
    sys.exit(main())
