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
    data_dir: Path = Field(
        default=Path("data"),
        description="Where the embedded SQLite database lives when FELAB_DATABASE_URL is not set.",
    )
    database_url: str | None = Field(
        default=None,
        description=(
            "SQLAlchemy URL of the database (postgresql+psycopg://... in production); "
            "unset means SQLite at DATA_DIR/felab.db."
        ),
    )
    content_dir: Path = Field(
        default=Path("content"), description="The course's content packs (one YAML file per day)."
    )
    drill_retention: float = Field(
        default=0.9,
        gt=0.5,
        lt=1.0,
        description="Share of cards FSRS aims to have remembered when each comes due.",
    )
    drill_fuzz: bool = Field(
        default=True,
        description="Spread review dates a little so cards learned together return apart.",
    )

    def resolved_database_url(self) -> str:
        """The URL to connect to: FELAB_DATABASE_URL, or the embedded SQLite file."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'felab.db').resolve()}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
