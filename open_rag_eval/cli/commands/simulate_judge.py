"""`open-rag-eval simulate-judge`: serve the simulated judge on loopback until interrupted."""

from __future__ import annotations

import argparse
import logging
import threading

HELP = "serve the simulated OpenAI-compatible judge on loopback (tests, benchmarks, the offline demo)"

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8000, help="port 0-65535 (0 picks a free one; default 8000)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="mean latency per completion")
    parser.add_argument("--jitter-ms", type=float, default=0.0, help="latency varies uniformly by +- this")
    parser.add_argument("--error-rate", type=float, default=0.0, help="share of requests answered 429/500")
    parser.add_argument("--malformed-rate", type=float, default=0.0, help="share of malformed replies")
    parser.add_argument("--timeout-rate", type=float, default=0.0, help="share of requests left hanging")
    parser.add_argument("--retry-after", type=float, default=1.0, help="Retry-After seconds on 429 (<0: none)")
    parser.add_argument("--api-key-env", default=None, help="require the key held by this environment variable")
    parser.add_argument("--seed", type=int, default=0)


def _port(text: str) -> int:
    """A TCP port: a whole number from 0 to 65535 (argparse turns the error into one usage line, exit 2)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0 to 65535, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535 (0 picks a free one), got {port}")
    return port


def _config(args: argparse.Namespace) -> object:
    import os

    from pydantic import ValidationError

    from open_rag_eval.core.errors import ConfigError
    from open_rag_eval.judge.simulated import SimulatedServerConfig

    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not key:
        raise ConfigError(f"environment variable {args.api_key_env} is not set", path="--api-key-env")
    try:
        return SimulatedServerConfig(
            latency_ms=args.latency_ms, jitter_ms=args.jitter_ms, error_rate=args.error_rate,
            malformed_rate=args.malformed_rate, timeout_rate=args.timeout_rate, seed=args.seed, api_key=key,
            retry_after_s=args.retry_after if args.retry_after >= 0 else None,
        )
    except ValidationError as error:
        problem = error.errors()[0]
        raise ConfigError(str(problem["msg"]), path="--" + str(problem["loc"][0]).replace("_", "-")) from None


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.core.errors import ConfigError
    from open_rag_eval.judge.simulated import SimulatedJudgeServer

    server = SimulatedJudgeServer(_config(args), host=args.host, port=args.port)  # type: ignore[arg-type]
    try:
        base_url = server.start()
    except OSError as error:
        raise ConfigError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}",
                          path="--port") from None
    log.info("simulated judge (scores mean nothing) listening on %s -- set judge.base_url to it; Ctrl-C stops", base_url)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        stats = server.stats
        server.stop()
        log.info("simulated judge served %d requests (max %d in flight)", stats.requests, stats.max_in_flight)
    return 0
