"""The bytes of the project's HTTP requests that need no HTTP library: the encodings it accepts, the head of a
POST and the body of a chat completion.

Free of any HTTP package so that a run's first judge requests can be built before one has loaded
(``judge.head_start``); the judge's keep-alive pool (``judge.http11``) and its transport build theirs here too, so
both are the same bytes.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from open_rag_eval._version import __version__

__all__ = ["ACCEPT_ENCODING", "NO_KEY", "OWN_HEADERS", "chat_body", "chat_head", "local_host", "post_head",
           "proxied", "sdk_settings", "user_agent"]

ACCEPT_ENCODING = "gzip, deflate"  # the only encodings we inflate (httpx would also offer br/zstd when installed)
# the judge's pool sets these itself (or refuses them)
OWN_HEADERS = frozenset({b"accept-encoding", b"connection", b"content-length", b"transfer-encoding"})
NO_KEY = "not-needed"  # the key sent to a local server that needs none (OpenAI-compatible servers expect the header)
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
_SDK_IGNORES = frozenset({"OPENAI_API_KEY", "OPENAI_BASE_URL"})  # both given to the SDK, which then ignores them


def post_head(target: bytes, headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The encoded head of a POST to ``target`` with ``headers``, up to the value of its Content-Length (added for
    each body): the same head serves every request that differs only in its body."""
    lines = [b"POST " + (target or b"/") + b" HTTP/1.1"]
    lines += [name + b": " + value for name, value in headers if name.lower() not in OWN_HEADERS]
    lines.append(b"Accept-Encoding: " + ACCEPT_ENCODING.encode("ascii"))
    return b"\r\n".join(lines) + b"\r\nContent-Length: "


def chat_head(netloc: bytes, base_path: bytes, api_key: str, headers: Mapping[str, str] | None = None) -> bytes:
    """The head (``post_head``) of a chat completion to a plain OpenAI-compatible endpoint at ``netloc`` and
    ``base_path``, as normalised by an HTTP library: the request the ``openai`` SDK builds less its ``x-stainless-*``
    diagnostic headers (tests/test_judge_transports.py holds the two together)."""
    base = base_path if base_path.endswith(b"/") else base_path + b"/"  # the SDK's trailing slash
    own = {"authorization": f"Bearer {api_key}", "accept": "application/json", "content-type": "application/json",
           "user-agent": user_agent(), **(headers or {})}
    return post_head(base + b"chat/completions",
                     [(b"Host", netloc), *((name.encode("latin-1"), value.encode("latin-1")) for name, value in
                                           own.items())])


def chat_body(params: Mapping[str, Any], model: str, messages: Sequence[tuple[str, str]]) -> bytes:
    """A chat completion's request body: the final params, the model and the messages, as compact JSON."""
    listed = [{"role": role, "content": content} for role, content in messages]
    return json.dumps({**params, "model": model, "messages": listed}, ensure_ascii=False,
                      separators=(",", ":")).encode()


def user_agent() -> str:
    return f"open-rag-eval/{__version__}"


def proxied() -> bool:
    """A proxy is configured in the environment (any case): then the ``httpx2`` client, which honours it, is used."""
    return any(os.environ.get(name) or os.environ.get(name.upper()) for name in _PROXY_VARIABLES)


def sdk_settings() -> bool:
    """Whether the environment holds an ``OPENAI_*`` setting the ``openai`` SDK may turn into a header
    (organization, project, another key...): then every judge request waits for the SDK."""
    return any(name.startswith("OPENAI_") and name not in _SDK_IGNORES for name in os.environ)


def local_host(host: str) -> bool:
    """Loopback, private-network and ``localhost`` hosts (vLLM, Ollama, LM Studio, ...): their servers need no key."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost") or host == "host.docker.internal":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_unspecified
