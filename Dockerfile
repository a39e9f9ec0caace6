# felab's image for the bot, the ingest and migrations (docker-compose.yml). No secrets in it:
# every setting comes from the environment at run time.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FELAB_DATA_DIR=/data \
    FELAB_CONTENT_DIR=/app/content

WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY felab ./felab
COPY felab_core ./felab_core
COPY felab_worker ./felab_worker
COPY felab_bot ./felab_bot
COPY alembic ./alembic
COPY content ./content
RUN apt-get update \
    && apt-get install -y --no-install-recommends postgresql-client \
    && rm -rf /var/lib/apt/lists/* \
    && pip install ".[server]" \
    && useradd --create-home --uid 10001 felab \
    && mkdir -p /data \
    && chown felab /data

USER felab
VOLUME ["/data"]
CMD ["felab", "--help"]
