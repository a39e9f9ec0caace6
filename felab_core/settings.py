"""Configuration from `FELAB_*` environment variables, one place for every setting."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_cache_dir() -> Path:
    return Path.home() / ".cache" / "felab"


class Settings(BaseSettings):
    """Every setting felab reads; the README's settings table mirrors this class."""

    model_config = SettingsConfigDict(env_prefix="FELAB_", extra="ignore")

    targets_file: Path | None = Field(
        default=None,
        description="TOML file naming the servers to time (shared by `felab bench` and workers).",
    )
    results_dir: Path = Field(
        default=Path("results"), description="Where CSV rows, JSON records and charts are written."
    )
    cache_dir: Path = Field(
        default_factory=_default_cache_dir,
        description="Builds and installs kept between runs (llama-server, MLX, vLLM environments).",
    )
    log_level: str = Field(default="WARNING", description="Python log level for felab's own logs.")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
