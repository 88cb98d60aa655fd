"""What a run's files say about the run itself: whether its judge was simulated, the config's digest, the version.

``run/`` decides it once, when the run's judge has answered (``run.session.run_info``), and hands it to every
writer below; nothing else decides whether a run was simulated."""

from __future__ import annotations

from dataclasses import dataclass

from open_rag_eval._version import __version__

__all__ = ["RunInfo"]


@dataclass(frozen=True)
class RunInfo:
    """``simulated``: the run's judge was the loopback simulated judge or answered as one (its scores mean nothing
    about a real system); ``config_digest``: the sha256 of the run's config as loaded; ``tool_version``: this
    package's version."""

    simulated: bool = False
    config_digest: str = ""
    tool_version: str = __version__
