"""`open-rag-eval serve`: the evaluation service (HTTP API, job runner, dashboard); `serve keys ...` manages API keys."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

HELP = "run the evaluation service (jobs over HTTP, dashboard); 'serve keys create|list|revoke' manages API keys"

log = logging.getLogger("open_rag_eval")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="server config YAML (default: built-in defaults, SQLite)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other needs "
                        "auth: true)")
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    sub = parser.add_subparsers(dest="serve_action", metavar="keys")
    keys = sub.add_parser("keys", help="create, list or revoke API keys").add_subparsers(dest="keys_action",
                                                                                            required=True)
    create = keys.add_parser("create", help="a new key for a tenant, printed once")
    create.add_argument("--tenant", required=True)
    create.add_argument("--scopes", default="read,write", help="comma-separated: read, write (default both)")
    create.add_argument("--name", default="", help="a label to recognise the key by")
    keys.add_parser("list", help="every key: id, tenant, scopes, revoked (never the key itself)")
    revoke = keys.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id")
    for command in (create, keys.choices["list"], revoke):
        command.add_argument("--config", dest="keys_config", type=Path, help="server config YAML")


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.service.settings import load_settings

    if args.serve_action == "keys":
        from open_rag_eval.cli.commands.keys import keys_command

        return keys_command(load_settings(args.keys_config or args.config), args)
    from open_rag_eval.service.serve import serve

    return serve(load_settings(args.config), args.host, args.port)
