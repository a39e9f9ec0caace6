"""Alembic's entry point: migrations run against FELAB_DATABASE_URL (or the embedded SQLite).

A caller that already holds a connection (felab_core.db.session.upgrade, the tests) passes it in
`config.attributes["connection"]`; otherwise the URL is the one set on the config, else the
settings'. SQLite gets batch mode, so ALTERs are done by copying the table, rows included.
"""

from __future__ import annotations

from logging.config import fileConfig

from sqlalchemy import Connection, pool

from alembic import context
from felab_core.db.models import Base
from felab_core.db.session import make_engine
from felab_core.settings import get_settings

config = context.config
if config.config_file_name is not None and config.attributes.get("connection") is None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or get_settings().resolved_database_url()


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_migrations_offline() -> None:
    """Write the SQL instead of running it (`alembic upgrade head --sql`)."""
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=_url().startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    given = config.attributes.get("connection")
    if given is not None:
        _configure(given)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as connection:
        raw = connection.connection.dbapi_connection
        if connection.dialect.name == "sqlite" and raw is not None:
            # Batch mode copies and drops tables: with foreign keys on, the drop would cascade.
            raw.execute("PRAGMA foreign_keys=OFF")
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
