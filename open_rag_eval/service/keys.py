"""API keys: random, shown once, stored as a SHA-256 hash, bound to one tenant and a set of scopes.

A key reads ``ore_<id>_<secret>``: the id finds the row, the secret's hash is compared in constant time. The secret
has 256 bits of randomness, so a plain hash is enough (no password stretching: nothing here is guessable).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from open_rag_eval.core.errors import ConfigError
from open_rag_eval.service.db import api_keys

__all__ = ["SCOPES", "Principal", "create_key", "list_keys", "revoke_key", "verify"]

SCOPES = ("read", "write", "metrics")  # metrics: GET /metrics (the whole deployment's numbers)
PREFIX = "ore_"
_KEY = re.compile(r"^ore_([a-z0-9]{12})_([A-Za-z0-9_-]{43})$")
_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True)
class Principal:
    tenant: str
    scopes: frozenset[str]
    key_id: str | None = None  # None: auth is off (loopback)

    def may(self, scope: str) -> bool:
        return scope in self.scopes


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def check_scopes(scopes: list[str]) -> list[str]:
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown or not scopes:
        raise ConfigError(f"scopes must be some of {', '.join(SCOPES)}; got {', '.join(scopes) or 'none'}",
                          path="--scopes")
    return sorted(set(scopes))


async def create_key(engine: AsyncEngine, tenant: str, scopes: list[str], name: str = "") -> tuple[str, str]:
    """A new key for ``tenant``: (id, the full key -- shown once, never stored)."""
    if not _TENANT.match(tenant):
        raise ConfigError("a tenant is 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit",
                          path="--tenant")
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    async with engine.begin() as connection:
        await connection.execute(api_keys.insert().values(
            id=key_id, hash=_hash(secret), tenant=tenant, scopes=",".join(check_scopes(scopes)), name=name,
            created=time.time()))
    return key_id, f"{PREFIX}{key_id}_{secret}"


async def revoke_key(engine: AsyncEngine, key_id: str) -> bool:
    async with engine.begin() as connection:
        result = await connection.execute(api_keys.update().where(
            api_keys.c.id == key_id, api_keys.c.revoked.is_(None)).values(revoked=time.time()))
    return bool(result.rowcount)


async def list_keys(engine: AsyncEngine) -> list[dict[str, Any]]:
    async with engine.connect() as connection:
        rows = (await connection.execute(
            sa.select(api_keys.c.id, api_keys.c.tenant, api_keys.c.scopes, api_keys.c.name, api_keys.c.created,
                      api_keys.c.revoked).order_by(api_keys.c.created))).mappings().all()
    return [dict(row) for row in rows]


async def verify(engine: AsyncEngine, presented: str) -> Principal | None:
    """The principal of a valid, unrevoked key; None for anything else."""
    match = _KEY.match(presented)
    if match is None:
        return None
    key_id, secret = match.groups()
    async with engine.connect() as connection:
        row = (await connection.execute(sa.select(api_keys).where(api_keys.c.id == key_id))).mappings().first()
    if row is None or row["revoked"] is not None or not hmac.compare_digest(row["hash"], _hash(secret)):
        return None
    return Principal(row["tenant"], frozenset(row["scopes"].split(",")), key_id)
