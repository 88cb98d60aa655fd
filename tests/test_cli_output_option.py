"""One spelling for where a command writes: ``-o`` / ``--output`` in every command that writes a file or a folder;
the spellings of earlier versions (``--output-dir``, ``--output-file``) stay as aliases."""

from __future__ import annotations

import pytest

from open_rag_eval.cli import _parser

# command, the arguments it needs besides the output, the attribute the output lands in
COMMANDS = [
    (["eval", "--config", "c.yaml"], "output_dir", "--output-dir"),
    (["compare", "a", "b"], "output_dir", "--output-dir"),
    (["calibrate", "--labels", "l.csv", "--results", "r"], "output_dir", "--output-dir"),
    (["merge", "a"], "output_dir", "--output-dir"),
    (["plot", "a", "--evaluator", "trec"], "output_file", "--output-file"),
    (["report", "a"], "output", None),
    (["generate-queries", "--corpus", "c", "--n", "3"], "output", None),
]


@pytest.mark.parametrize(("args", "dest", "old"), COMMANDS)
def test_every_command_takes_o_and_output_and_its_old_spelling(args: list[str], dest: str, old: str | None) -> None:
    parser = _parser()
    for flag in ("-o", "--output", *([old] if old else [])):
        parsed = parser.parse_args([*args, flag, "out-x"])
        assert str(getattr(parsed, dest)) == "out-x", (args[0], flag)


def test_help_names_output_first() -> None:
    for args, _, _ in COMMANDS:
        sub = _parser()._subparsers._group_actions[0].choices[args[0]]  # type: ignore[union-attr]
        usage = sub.format_usage()
        assert "-o " in usage, args[0]
