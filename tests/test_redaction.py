"""Property tests for the one redaction point, the CSV cell rule and the console's escaping."""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from open_rag_eval.core import redaction
from open_rag_eval.store.csv_cells import csv_text, read_cell, safe_cell
from open_rag_eval.core.redaction import MASK, RedactingFilter, SecretStream, cut, redact, register_secret, safe_url
from open_rag_eval.cli.terminal import printable

SECRET_CHARS = "ABCDEFGHJKMNPQRSTVWXYZ0123456789"  # the surrounding text uses none of them
TEXT_CHARS = "abcdefghijklmnopqrstuvwxyz .,:;!?-_\n\t"

secrets_ = st.text(SECRET_CHARS, min_size=8, max_size=60)
texts = st.text(TEXT_CHARS, max_size=400)


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    saved = redaction.registered()
    redaction.forget_secrets()
    yield
    redaction.forget_secrets()
    for value in saved:
        register_secret(value)


def _leaks(secret: str, text: str, size: int = 6) -> list[str]:
    return [secret[i:i + size] for i in range(len(secret) - size + 1) if secret[i:i + size] in text]


@settings(max_examples=300, deadline=None)
@given(secret=secrets_, before=texts, after=texts, limit=st.integers(min_value=1, max_value=900))
def test_a_secret_at_any_offset_survives_no_cut(secret: str, before: str, after: str, limit: int) -> None:
    redaction.forget_secrets()
    register_secret(secret)
    text = before + secret + after + secret
    shown = cut(text, limit)
    assert len(shown) <= limit
    assert not _leaks(secret, shown)
    assert not _leaks(secret, redact(text))


@settings(max_examples=200, deadline=None)
@given(secret=secrets_, before=texts, after=texts, sizes=st.lists(st.integers(1, 70), min_size=1, max_size=40))
def test_secret_stream_removes_a_secret_split_across_writes(secret: str, before: str, after: str,
                                                            sizes: list[int]) -> None:
    redaction.forget_secrets()
    register_secret(secret)
    text = before + secret + after
    sink = io.StringIO()
    stream = SecretStream(sink)
    position = 0
    for size in sizes * (len(text) // max(1, sum(sizes)) + 1):
        if position >= len(text):
            break
        stream.write(text[position:position + size])
        position += size
    stream.write(text[position:])
    stream.flush()
    assert sink.getvalue() == before + MASK + after


@settings(max_examples=200, deadline=None)
@given(user=st.text("abcdefgh", min_size=1, max_size=12), password=secrets_,
       token=secrets_, limit=st.integers(min_value=20, max_value=300))
def test_url_credentials_and_query_tokens_are_removed(user: str, password: str, token: str, limit: int) -> None:
    url = f"https://{user}:{password}@rag.example.com:8443/v1/query?api_key={token}&lang=en"
    message = f"cannot reach {url} (HTTP 502)"
    for shown in (redact(message), cut(message, limit), safe_url(url)):
        assert not _leaks(password, shown) and not _leaks(token, shown)
    assert safe_url(url) == "https://rag.example.com:8443/v1/query?api_key=***&lang=en"
    for name in ("key", "token", "access_token", "password", "sig"):
        assert redact(f"GET /x?{name}={token}&a=1") == f"GET /x?{name}=***&a=1"


def test_the_log_filter_redacts_arguments_and_tracebacks() -> None:
    register_secret("sk-LOGFILTER-0123456789")
    logger = logging.getLogger("open_rag_eval.test_redaction")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger.addHandler(handler)
    try:
        logger.warning("key %s in https://u:pw-0123456789@host/x", "sk-LOGFILTER-0123456789")
        try:
            raise ValueError("failed with sk-LOGFILTER-0123456789")
        except ValueError:
            logger.exception("call failed")
    finally:
        logger.removeHandler(handler)
    shown = stream.getvalue()
    assert "LOGFILTER" not in shown and "pw-0123456789" not in shown
    assert "key *** in https://***@host/x" in shown and "ValueError: failed with ***" in shown


def test_short_values_are_not_registered() -> None:
    register_secret("pass")  # would mask "passages" in every output file
    assert redaction.registered() == ()
    assert redact("passages") == "passages"


# -- CSV cells ----------------------------------------------------------------------------------------------------

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
cells = st.one_of(st.text(max_size=30), st.sampled_from(["=1+1", "-2", "-0.5", "+3", "@SUM(A1)", "'=x", "''-y",
                                                         "-1e-05", "-inf", "- 1", "-", "'", "",
                                                         "-\u0663", "+\u00b9"]),
                  st.builds(lambda head, tail: head + tail, st.sampled_from(FORMULA_START + ("'", "''")),
                            st.text(max_size=10)))


@settings(max_examples=500, deadline=None)
@given(cells)
def test_a_text_cell_never_starts_a_formula_and_reads_back_unchanged(cell: str) -> None:
    written = safe_cell(cell)
    number = _is_number(cell)
    assert not written.startswith(FORMULA_START) or number
    assert read_cell(written) == cell
    if number:
        assert written == cell  # numbers, negative ones too, stay numbers


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(cells, st.floats(allow_nan=False, allow_infinity=False), st.integers()), max_size=8))
def test_csv_text_round_trips_and_keeps_numbers(rows: list[tuple[str, float, int]]) -> None:
    text = csv_text(["id", "score", "n"], rows)
    back = list(csv.reader(io.StringIO(text, newline="")))
    assert back[0] == ["id", "score", "n"]
    for (cell, score, n), line in zip(rows, back[1:]):
        assert read_cell(line[0]) == cell
        assert float(line[1]) == score and int(line[2]) == n  # numbers are written as numbers
    as_mappings = [{"n": n, "id": cell, "score": score} for cell, score, n in rows]
    assert csv_text(["id", "score", "n"], as_mappings) == text


def _is_number(text: str) -> bool:
    import re

    return re.fullmatch(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", text) is not None  # ASCII only


# -- the console ----------------------------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_printable_leaves_no_control_character(text: str) -> None:
    shown = printable(text)
    assert not any((ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f
                   or c in "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"
                   for c in shown)
    if not any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f for c in text) and "\\" not in text:
        assert shown == text or any(0x2000 <= ord(c) <= 0x206f or c == "\u061c" for c in text)


def test_printable_shows_escape_sequences_readably() -> None:
    assert printable("id\x1b[2J\x1b]0;title\x07\rx\u202e") == "id\\x1b[2J\\x1b]0;title\\a\\rx\\u202e"


def test_an_unexpected_traceback_is_redacted_and_printable(capsys: pytest.CaptureFixture[str]) -> None:
    from open_rag_eval.cli.terminal import excepthook

    register_secret("sk-CRASH-0123456789abcdef")
    try:
        raise RuntimeError("header Authorization: Bearer sk-CRASH-0123456789abcdef\x1b[2J")
    except RuntimeError as error:
        excepthook(RuntimeError, error, error.__traceback__)
    shown = capsys.readouterr().err
    assert "Traceback (most recent call last)" in shown and "RuntimeError: header Authorization: Bearer ***" in shown
    assert "CRASH" not in shown and "\x1b" not in shown and "\\x1b[2J" in shown


def test_a_secret_with_special_characters_is_found_escaped_in_json_html_and_urls() -> None:
    secret = 'pa"ss<wo&rd>\\é/+=x'
    register_secret(secret)
    import html
    import json
    from urllib.parse import quote

    for shown in (json.dumps({"e": secret}), json.dumps({"e": secret}, ensure_ascii=False), html.escape(secret),
                  "https://h/x?key=" + quote(secret, safe="")):
        sink = io.StringIO()
        stream = SecretStream(sink)
        stream.write(shown)
        stream.flush()
        assert MASK in sink.getvalue() and "wo&" not in sink.getvalue() and "wo&amp;" not in sink.getvalue()


def test_every_output_file_written_by_the_atomic_writer_is_redacted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The safety net under the redaction at the sources: a registered secret that reached a result anyway (a
    judge echoing it in a 200 reply, a reason built outside ``cut``) is masked in the file itself."""
    from open_rag_eval.store.fileio import atomic_write, atomic_write_json, atomic_write_text

    secret = "sk-WRITER-0123456789abcdef"
    register_secret(secret)
    atomic_write_text(tmp_path / "a.txt", f"reason: HTTP 500 for {secret}\n")
    atomic_write_json(tmp_path / "b.json", {"error": secret, "details": [secret[:10] + secret[10:]]})
    atomic_write(tmp_path / "c.jsonl", lambda handle: [handle.write(part) for part in (secret[:7], secret[7:], "\n")])
    for name in ("a.txt", "b.json", "c.jsonl"):
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert "WRITER" not in text and MASK in text, name


def test_csv_and_console_output_have_one_way_out() -> None:
    """Every CSV goes through ``csv_cells.csv_text`` (formula cells) and every console line through ``terminal.echo``
    or the log (redaction, control characters): no other module writes CSV rows or to stdout/stderr itself."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    allowed = {"open_rag_eval/store/csv_cells.py", "open_rag_eval/cli/terminal.py"}
    pattern = re.compile(r"\bcsv\.(writer|DictWriter)\(|\bsys\.(stdout|stderr)\.write\(|(?<![.\w])print\(")
    found = []
    for folder in ("open_rag_eval",):
        for path in sorted((root / folder).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if name not in allowed and pattern.search(line.split("#", 1)[0]):
                    found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "use open_rag_eval.store.csv_cells.csv_text / open_rag_eval.cli.terminal.echo instead:\n" + "\n".join(found)


def test_credentials_filled_in_from_the_environment_are_registered(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``${VAR}`` in a header, in a credential-named key or as a URL's password makes its value a secret; a
    variable filling an ordinary value (a model name, a path) does not."""
    from open_rag_eval.config import load_config_text

    monkeypatch.setenv("T_HEADER", "hdr-0123456789abcdef")
    monkeypatch.setenv("T_PASSWORD", "pwd-0123456789abcdef")
    monkeypatch.setenv("T_MODEL", "model-name-not-secret")
    text = """
connector:
  type: http
  queries: q.csv
  options:
    url: "https://bot:${T_PASSWORD}@rag.example.com/query"
    headers: {X-Trace-Id: "${T_HEADER}"}
judge: {model: "${T_MODEL}"}
evaluators: [{type: consistency, metrics: [rouge]}]
"""
    load_config_text(text, base_dir=tmp_path)
    assert redact("a hdr-0123456789abcdef b pwd-0123456789abcdef c") == "a *** b *** c"
    assert redact("model-name-not-secret") == "model-name-not-secret"
