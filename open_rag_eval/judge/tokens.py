"""Token estimates without a tokenizer: words and punctuation marks, close to BPE counts for English prose.

The simulated judge reports usage with these, and ``--dry-run`` estimates with them, so both count alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["chat_tokens", "count_tokens"]

_TOKEN = re.compile(r"\w+|[^\w\s]")
PER_MESSAGE = 4  # role and separators of one chat message
PER_REQUEST = 3  # the reply's priming


def count_tokens(text: str) -> int:
    """Approximate tokens: words and punctuation marks."""
    return len(_TOKEN.findall(text))


def chat_tokens(contents: Iterable[str]) -> int:
    """Prompt tokens of a chat request with these message contents."""
    return sum(count_tokens(content) + PER_MESSAGE for content in contents) + PER_REQUEST
