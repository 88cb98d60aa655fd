"""The one redaction point: every configured secret is removed from a message before anything cuts, logs or writes it.

Secrets are *registered* where they are read (the judge key, a connector's ``secret_headers`` values, a header or
key-like value interpolated from the environment, the password of a URL in the config). ``redact(text)`` then removes

- every registered secret, wherever it occurs (longest first);
- credentials written in a URL (``https://user:pass@host`` becomes ``https://***@host``);
- the value of a credential-like query parameter (``?api_key=…``, ``key=``, ``token=``, ``access_token=``,
  ``password=``, ``secret=``, ``sig=``…) becomes ``***``.

``cut(text, limit)`` is the one way a message is shortened: it redacts *first*, so a cut can never leave a prefix of a
secret behind. ``RedactingFilter`` applies ``redact`` to every log record a handler emits; the CLI's error line, the
output files (``fileio.atomic_write``) and the console go through it too.
"""

from __future__ import annotations

import html
import json
import logging
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

__all__ = ["MASK", "RedactingFilter", "SecretStream", "cut", "forget_secrets", "is_secret_name", "redact",
           "redact_secrets", "register_credentials", "register_interpolated", "register_secret",
           "register_url_credentials", "registered", "safe_url", "scrub_config"]

MASK = "***"
MIN_SECRET = 8  # shorter values would mask ordinary words in output files ("pass" in "passages")

TOKEN_USER = 16  # a URL's user alone (no password) this long is a token: https://ghp_xxxxxxxxxxxxxxxx@host
_lock = threading.Lock()
_secrets: tuple[str, ...] = ()  # longest first

_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#@\s\"'<>]+)@")
_QUERY_NAMES = r"(?:api[_-]?key|apikey|key|access[_-]?token|refresh[_-]?token|id[_-]?token|token|auth|password|" \
               r"passwd|pwd|secret|client[_-]?secret|sig|signature|x-amz-signature|x-api-key|code)"
_QUERY_SECRET = re.compile(r"(?P<lead>[?&;]" + _QUERY_NAMES + r"=)(?P<value>[^&#\s\"'<>;]+)", re.IGNORECASE)
_SECRET_NAME = re.compile(r"(?:^|[_\-. ])(?:api[_\-]?key|apikey|key|token|secret|password|passwd|pwd|auth|"
                          r"authorization|cookie|credentials?|signature)(?:$|[_\-. ])", re.IGNORECASE)


def register_secret(value: str | None) -> None:
    """Remember ``value`` as a secret of this process: ``redact`` removes it from every message from now on."""
    global _secrets
    if not value:
        return
    value = value.strip()
    if len(value) < MIN_SECRET:
        return
    # as written in a JSON string, in HTML and in a URL, where its special characters are escaped
    forms = {value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1], html.escape(value),
             quote(value, safe="")}
    with _lock:
        if not forms <= set(_secrets):
            _secrets = tuple(sorted({*_secrets, *forms}, key=len, reverse=True))


def registered() -> tuple[str, ...]:
    return _secrets


def forget_secrets() -> None:
    """For tests: start again with no registered secret."""
    global _secrets
    with _lock:
        _secrets = ()


def redact_secrets(text: str) -> str:
    """Only the registered secrets (no URL patterns): safe for whole output files, whose data it must not change."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact(text: str) -> str:
    """The message without any registered secret, URL credentials or credential-like query values."""
    text = redact_secrets(text)
    if "://" in text:
        text = _URL_USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)
    if "=" in text:
        text = _QUERY_SECRET.sub(lambda m: m.group("lead") + MASK, text)
    return text


def cut(text: str, limit: int = 300) -> str:
    """Redact, then squeeze whitespace and shorten to ``limit`` characters (an ellipsis marks the cut).

    Only a window of the text is redacted (a 1 MB error body costs no more than a short one); the window reaches past
    the cut by more than the longest secret, so a secret that starts before the cut is whole inside it."""
    window = 2 * limit + 1024 + (len(_secrets[0]) if _secrets else 0)
    text = " ".join(redact(text[:window]).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def safe_url(url: str) -> str:
    """A URL with no credentials: user and password dropped, credential-like query values masked."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return redact(url)
    register_url_credentials(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port else "")
    query = redact("?" + parts.query)[1:] if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def register_url_credentials(url: str) -> None:
    """Register the password written in a URL (or its user, when that is a token: ``https://TOKEN@host``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    if parts.password:
        register_secret(unquote(parts.password))
        register_secret(parts.password)
    elif parts.username and len(parts.username) >= TOKEN_USER:
        register_secret(unquote(parts.username))
        register_secret(parts.username)


def register_credentials(headers: Mapping[str, str] | None = None, url: str = "") -> None:
    """The credentials a request carries in plain sight: the value of a header whose name says credential (after a
    scheme such as ``Bearer``) and a URL's password (or its user, when that is a token)."""
    for name, value in (headers or {}).items():
        if is_secret_name(name):
            register_secret(value.split(" ", 1)[-1])
    if url:
        register_url_credentials(url)


def register_interpolated(path: str, value: str) -> None:
    """A config value filled in from the environment: a secret when its key names a credential or it is a header
    (``connector.options.headers.X-Token: ${TOKEN}``); a URL's password is one in any case."""
    parts = path.replace("[", ".").split(".")
    if is_secret_name(parts[-1]) or "headers" in parts[:-1]:
        register_secret(value.split(" ", 1)[-1] if " " in value.strip() else value)
    if "://" in value:
        register_url_credentials(value)


def is_secret_name(name: str) -> bool:
    """A header or option name that holds a credential (Authorization, X-Api-Key, token, password, cookie...)."""
    return bool(_SECRET_NAME.search(name))


def scrub_config(value: Any, key: str = "") -> Any:
    """A config (as written, before interpolation) fit for manifest.json: URL credentials removed, literal values of
    credential-named keys masked (``${VAR}`` references are kept: they name a variable, not its value)."""
    if isinstance(value, Mapping):
        return {k: scrub_config(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_config(item, key) for item in value]
    if not isinstance(value, str):
        return value
    if key and is_secret_name(key) and not key.endswith("_env") and key != "env" and "${" not in value:
        register_secret(value)
        return MASK
    if "://" in value:
        return safe_url(value)
    return redact(value)


class RedactingFilter(logging.Filter):
    """Redacts each record's message (and rendered traceback) before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: keep what there is
            message = str(record.msg)
        record.msg, record.args = redact(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


class SecretStream:
    """A text stream that removes registered secrets from what is written, even when one is split across writes.

    Writes are gathered into blocks of about 64 KB; each block is redacted together with the tail of the previous one
    (a secret cut by a block boundary starts within the last ``len(longest secret) - 1`` characters, kept back)."""

    BLOCK = 1 << 16

    def __init__(self, stream: Any) -> None:
        self._stream, self._tail = stream, ""
        self._pending: list[str] = []
        self._size = 0

    def write(self, text: str) -> int:
        self._pending.append(text)
        self._size += len(text)
        if self._size >= self.BLOCK:
            self._drain(final=False)
        return len(text)

    def _drain(self, *, final: bool) -> None:
        buffer = self._tail + "".join(self._pending)
        self._pending, self._size = [], 0
        secrets = _secrets
        if secrets:
            buffer = redact_secrets(buffer)
        keep = 0 if final or not secrets else len(secrets[0]) - 1
        self._tail = buffer[len(buffer) - keep:] if keep else ""
        self._stream.write(buffer[: len(buffer) - keep] if keep else buffer)

    def flush(self) -> None:
        self._drain(final=True)
        self._stream.flush()

    def fileno(self) -> int:
        return int(self._stream.fileno())

