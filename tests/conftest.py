"""Shared fixtures. Real-server fixtures (tiny model, llama-server, MLX) live in lab_fixtures."""

from __future__ import annotations

from pathlib import Path

_here = Path(__file__).parent
pytest_plugins = ["tests.lab_fixtures"] if (_here / "lab_fixtures.py").exists() else []
# Database fixtures (SQLite and PostgreSQL) for the service-layer tests.
pytest_plugins = [*pytest_plugins, "tests.db_support"]
