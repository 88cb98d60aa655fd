"""The service's small parts in process: round-robin judge sharing, the server config, keys."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from open_rag_eval.core.errors import ConfigError
from open_rag_eval.service.fair import FairShare
from open_rag_eval.service.settings import Settings, is_loopback, load_settings


def test_a_freed_slot_goes_to_the_next_job_in_turn_not_to_the_biggest_queue() -> None:
    async def scenario() -> list[str]:
        share = FairShare(1)
        order: list[str] = []
        release = asyncio.Event()

        async def call(job: str) -> None:
            async with share.slot(job):
                order.append(job)
                await release.wait()

        big = [asyncio.create_task(call("big")) for _ in range(6)]
        await asyncio.sleep(0)  # the first big call holds the slot, five wait
        small = [asyncio.create_task(call("small")) for _ in range(2)]
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*big, *small)
        return order

    order = asyncio.run(scenario())
    assert order == ["big", "big", "small", "big", "small", "big", "big", "big"]


def test_a_cancelled_waiter_gives_its_place_back() -> None:
    async def scenario() -> int:
        share = FairShare(1)
        gate = asyncio.Event()

        async def hold() -> None:
            async with share.slot("a"):
                await gate.wait()

        holder = asyncio.create_task(hold())
        await asyncio.sleep(0)
        waiter = asyncio.create_task(hold())
        await asyncio.sleep(0)
        waiter.cancel()
        gate.set()
        await holder
        await asyncio.gather(waiter, return_exceptions=True)
        async with share.slot("b"):
            return share.in_use

    assert asyncio.run(scenario()) == 1


def test_server_config_errors_name_the_file_and_path(tmp_path: Path) -> None:
    config = tmp_path / "server.yaml"
    config.write_text(f"judge_profiles:\n  x:\n    model: m\n    cache: {tmp_path / 'shared.sqlite'}\n")
    with pytest.raises(ConfigError, match="server.yaml: judge_profiles.*one judge cache per tenant"):
        load_settings(config)
    config.write_text("limits:\n  max_body_mb: -1\n")
    with pytest.raises(ConfigError, match="limits.max_body_mb"):
        load_settings(config)
    config.write_text("runner:\n  jobz: 3\n")
    with pytest.raises(ConfigError, match="runner.jobz"):
        load_settings(config)
    config.write_bytes(b"data_dir: caf\xe9\n")  # Latin-1, not UTF-8
    with pytest.raises(ConfigError, match="server.yaml.*config is not UTF-8 text"):
        load_settings(config)
    with pytest.raises(ConfigError, match="missing.yaml.*cannot read config"):
        load_settings(tmp_path / "missing.yaml")


def test_defaults_a_simulated_profile_and_sqlite_beside_the_config(tmp_path: Path) -> None:
    config = tmp_path / "server.yaml"
    config.write_text("data_dir: svc\n")
    settings = load_settings(config)
    assert settings.db_url == f"sqlite+aiosqlite:///{tmp_path / 'svc' / 'service.sqlite'}"
    assert settings.profile(None) == "simulated" and settings.sqlite
    with pytest.raises(ConfigError, match="unknown judge profile 'x'; this server has: simulated"):
        settings.profile("x")
    assert Settings(connector_allow=["http://rag.internal/"]).connector_allowed("http://rag.internal/q")
    allow = Settings(connector_allow=["http://rag.internal/api", "https://search.example.org:8443/"])
    for url in ("http://rag.internal/api", "http://rag.internal/api/query", "http://RAG.internal:80/api/q",
                "https://search.example.org:8443/x"):
        assert allow.connector_allowed(url), url
    for url in ("http://rag.internal.evil/api", "http://rag.internal/apix", "http://rag.internal:81/api",
                "https://rag.internal/api", "http://user@rag.internal/api", "http://evil.org@rag.internal/api",
                "http://rag.internal/api/../admin", "file:///etc/passwd", "http://rag.internal\\@evil.org/api",
                "https://search.example.org/x", "not a url", "http://rag.internal/api/%2e%2e/admin",
                "http://rag.internal/api/%2E%2E/admin", "http://rag.internal/api/%252e%252e/admin",
                "http://rag.internal/api/./q", "http://rag.internal/api/q\t", "http://rag.internal/api/q\n",
                "http://rag.internal/api/%ff", "http://rag.internal/api/%00", "http://rag.internal/api%2F..%2Fadmin"):
        assert not allow.connector_allowed(url), url



# every other spelling of "up one folder" or "this folder" a server or proxy may read, and any %-encoding at all
ODD_PATHS = ["/api/..;/admin", "/api/.;/q", "/api/..;x=1/admin", "/api/q;jsessionid=1", "/api/..\\admin",
             "/api/q\\..\\..\\admin", "/api\\q", "/api/%2e./admin", "/api/.%2e/admin", "/api/%2e%2e%3b/admin",
             "/api/%2fadmin", "/api%2fq", "/api%5cq", "/api/q%20x", "/api/%71", "/api//q", "/api/q/..",
             "/api/q/.", "/api/..", "/api/…/admin", "/api/ｑ", "/api/q\u00a0", "/api/q!", "/api/q:x", "/api/q@x"]


@pytest.mark.parametrize("path", ODD_PATHS)
def test_the_allow_list_judges_only_normalised_paths_of_unreserved_characters(path: str) -> None:
    allow = Settings(connector_allow=["http://rag.internal/api"])
    assert not allow.connector_allowed("http://rag.internal" + path), path
    assert allow.connector_allowed("http://rag.internal/api/q-1_x.y~z/Z9?query=..;/x%2e")  # a query is not a path


@pytest.mark.parametrize("prefix", ["http://rag.internal/api/..;/", "http://rag.internal/a%2fb/", "ftp://x/",
                                    "http://rag.internal/a//b"])
def test_an_allow_list_prefix_no_url_could_match_is_refused_at_start(prefix: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="normalised path of unreserved characters"):
        Settings(connector_allow=[prefix])


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("::1", True), ("localhost", True),
                                                ("0.0.0.0", False), ("10.0.0.5", False), ("example.org", False)])
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_the_migrations_build_exactly_the_tables_the_code_uses(tmp_path: Path) -> None:
    """Alembic's autogenerate compares the migrated database with ``db.metadata``: no difference."""
    import sqlalchemy as sa
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from open_rag_eval.service.db import metadata, migrate, open_engine

    async def build() -> None:
        engine = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'service.sqlite'}")
        await migrate(engine)
        await migrate(engine)  # a second start finds nothing to do
        await engine.dispose()

    asyncio.run(build())
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'service.sqlite'}")
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), metadata)
    engine.dispose()
    assert differences == []
