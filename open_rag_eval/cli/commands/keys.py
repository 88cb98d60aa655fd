"""``open-rag-eval serve keys create|list|revoke``: API keys, printed once at creation and stored hashed."""

from __future__ import annotations

import argparse
import asyncio
import logging
import time

from open_rag_eval.cli.terminal import echo
from open_rag_eval.core.errors import ConfigError
from open_rag_eval.service.settings import Settings

__all__ = ["keys_command"]

log = logging.getLogger("open_rag_eval")


def keys_command(settings: Settings, args: argparse.Namespace) -> int:
    from open_rag_eval.service.serve import require_server_extra

    require_server_extra(postgres=not settings.sqlite)
    return asyncio.run(_keys(settings, args))


async def _keys(settings: Settings, args: argparse.Namespace) -> int:
    from open_rag_eval.service import keys
    from open_rag_eval.service.storage import Storage

    storage = await Storage.open(settings, exclusive=False)  # beside a running server: it owns the runner
    try:
        if args.keys_action == "create":
            key_id, key = await keys.create_key(storage.engine, args.tenant, _scopes(args.scopes), args.name)
            echo(key)
            log.info("key %s for tenant %s created; it is shown once, above -- store it now", key_id, args.tenant)
        elif args.keys_action == "revoke":
            if not await keys.revoke_key(storage.engine, args.key_id):
                raise ConfigError(f"no active key {args.key_id!r}", path="key_id")
            log.info("key %s revoked", args.key_id)
        else:
            for row in await keys.list_keys(storage.engine):
                revoked = "revoked " + _when(row["revoked"]) if row["revoked"] else "active"
                echo(f"{row['id']}  tenant={row['tenant']}  scopes={row['scopes']}  created {_when(row['created'])}  "
                     f"{revoked}  {row['name']}".rstrip())
    finally:
        await storage.close()
    return 0


def _scopes(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))
