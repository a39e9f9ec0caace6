"""docker-compose.yml, Dockerfile and .env.example, checked without a Docker engine.

The file parses; every service has a restart policy and the long-running ones a health check;
every command and health check a felab service runs exists in this felab; every variable it
passes is a setting felab reads (POSTGRES_*/REDIS_* for those images), with the same default;
.env.example names every setting once; Redis is TLS only, with ACL users and no password for the
default user. Then each service's command runs natively with the compose file's environment,
mapped to local services: the TLS files made by the `tls` service's command, Redis started with
the compose file's own command line, the migration against a fresh PostgreSQL schema, the ingest
(`felab broker setup` prints the pairing URL; a machine pairs with it and gets a user of its
own), the bot against the fake Discord (and without a token it says so).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import create_engine, text

from felab_core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FELAB_SERVICES = ("tls", "migrate", "bot", "ingest")
#: Set in .env.example with a real value rather than felab's default (there is none to use).
REQUIRED = {"FELAB_DISCORD_TOKEN", "FELAB_BROKER_PUBLIC_URL"}
LONG_RUNNING = ("postgres", "redis", "bot", "ingest")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def env_example() -> tuple[dict[str, str], set[str]]:
    """(variables set, every variable named, commented out or not) in .env.example."""
    values: dict[str, str] = {}
    named: set[str] = set()
    for line in (ROOT / ".env.example").read_text().splitlines():
        m = re.match(r"^(#\s*)?([A-Z][A-Z0-9_]*)=(.*)$", line.strip())
        if not m:
            continue
        named.add(m.group(2))
        if m.group(1) is None:
            values[m.group(2)] = m.group(3)
    return values, named


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default}, ${VAR:?error} and $$, as `docker compose` does."""

    def one(m: re.Match[str]) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3)
        got = env.get(name)
        if op == ":-":
            return got if got else arg
        if op == ":?":
            if not got:
                raise ValueError(f"{name}: {arg}")
            return got
        return got or ""

    parts = value.split("$$")
    return "$".join(_VAR.sub(one, p) for p in parts)


def variables(obj: Any) -> Iterator[tuple[str, str | None]]:
    """Every ${VAR...} in the file: (name, its :- default or None)."""
    if isinstance(obj, dict):
        for v in obj.values():
            yield from variables(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from variables(v)
    elif isinstance(obj, str):
        for m in _VAR.finditer(obj):
            yield m.group(1), m.group(3) if m.group(2) == ":-" else None


def service_env(name: str, env: dict[str, str]) -> dict[str, str]:
    raw = compose()["services"][name].get("environment") or {}
    assert isinstance(raw, dict), f"{name}: environment as a mapping, please"
    return {k: interpolate(str(v), env) for k, v in raw.items()}


def setting_names() -> set[str]:
    return {f"FELAB_{n.upper()}" for n in Settings.model_fields}


# ----------------------------------------------------------------------------- static checks


def test_services_restart_policies_and_health_checks() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "redis", "prometheus", *FELAB_SERVICES}
    assert services["prometheus"]["profiles"] == ["metrics"]  # optional
    assert (ROOT / services["prometheus"]["volumes"][0].split(":")[0]).is_file()
    for name in LONG_RUNNING:
        assert services[name]["restart"] == "unless-stopped", name
        assert services[name]["healthcheck"]["test"], name
    assert services["migrate"]["restart"] == services["tls"]["restart"] == "no"
    assert services["migrate"]["command"] == ["alembic", "upgrade", "head"]
    for name in ("bot", "ingest"):
        deps = services[name]["depends_on"]
        assert deps["migrate"]["condition"] == "service_completed_successfully"
        assert deps["redis"]["condition"] == "service_healthy"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["redis"]["depends_on"]["tls"]["condition"] == "service_completed_successfully"


def test_redis_speaks_tls_only_with_acl_users() -> None:
    """README "Security": no shared password (every student would hold the default user), no
    plain-text port; felab-admin for the trusted side only."""
    redis = compose()["services"]["redis"]
    line = " ".join(redis["command"])
    assert "--requirepass" not in line and "--port 0 " in line and "--tls-port 6380" in line
    assert "--aclfile" in line and "user default off" in line
    assert "--tls-auth-clients no" in line  # students prove who they are by ACL user, not cert
    assert "--proto-max-bulk-len" in line  # a hostile push cannot be half a gigabyte
    assert redis["ports"] == ["6380:6380"]
    env = service_env("ingest", {**env_example()[0]})
    assert env["FELAB_BROKER_URL"].startswith("rediss://felab-admin:")
    assert env["FELAB_BROKER_CA_FILE"] == "/tls/ca.pem"


def _command_exists(cmd: list[str]) -> None:
    exe = BIN / cmd[0]
    assert exe.exists(), f"{cmd[0]} is not installed with felab"
    if cmd[0] != "felab":
        out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return
    words = [w for w in cmd[1:] if not w.startswith("-")]
    out = subprocess.run(
        [str(exe), *words, "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert out.returncode == 0, f"`{' '.join(cmd)}` is not a felab command:\n{out.stdout}"


def test_every_felab_command_and_health_check_exists() -> None:
    services = compose()["services"]
    for name in FELAB_SERVICES:
        _command_exists(services[name]["command"])
        check = services[name].get("healthcheck")
        if check:
            assert check["test"][0] == "CMD"
            _command_exists(check["test"][1:])


def test_variables_are_settings_with_their_defaults() -> None:
    data = compose()
    names = setting_names()
    for name in FELAB_SERVICES:
        env = data["services"][name]["environment"]
        extra = set(env) - names
        assert not extra, f"{name} passes variables felab does not read: {sorted(extra)}"
    for name, prefix in (("postgres", "POSTGRES_"), ("redis", "REDIS_")):
        env = data["services"][name].get("environment") or {}
        assert all(k.startswith(prefix) for k in env), name
    defaults = Settings.model_construct()
    for var, default in variables(data):
        if default is None or not var.startswith("FELAB_"):
            continue
        field = var.removeprefix("FELAB_").lower()
        assert var in names, var
        parsed = Settings.model_validate({field: default})
        assert getattr(parsed, field) == getattr(defaults, field), (
            f"{var} defaults to {default!r} in docker-compose.yml, not to felab's own default"
        )
    values, _ = env_example()
    used = {var for var, _ in variables(data)}
    assert used <= set(values), f"not in .env.example: {sorted(used - set(values))}"


def test_env_example_names_every_setting_once() -> None:
    values, named = env_example()
    assert setting_names() <= named, f"missing: {sorted(setting_names() - named)}"
    others = {n for n in named - setting_names()}
    assert others == {"POSTGRES_PASSWORD", "REDIS_ADMIN_PASSWORD"}
    text_ = (ROOT / ".env.example").read_text()
    for name in setting_names():
        assert len(re.findall(rf"^#?\s*{name}=", text_, re.M)) == 1, f"{name} named twice"
    defaults = Settings.model_construct()
    for var, value in values.items():
        if var.startswith("FELAB_") and value and var not in REQUIRED:
            field = var.removeprefix("FELAB_").lower()
            assert getattr(Settings.model_validate({field: value}), field) == getattr(
                defaults, field
            ), var


def test_dockerfile_installs_felab_and_holds_no_secret() -> None:
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    assert next(x for x in lines if x.startswith("FROM")).split()[1] == "python:3.11-slim"
    for line in lines:
        if line.startswith("COPY"):
            for src in line.split()[1:-1]:
                assert (ROOT / src).exists(), f"Dockerfile copies {src}, which is not here"
    body = "\n".join(lines)
    assert 'pip install ".[server]"' in body  # the server side: database, bot, ingest
    assert not re.search(r"(TOKEN|PASSWORD|SECRET)\s*=", body)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".env" in ignored and ".venv" in ignored


# ----------------------------------------------------------------------------- native runs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(pred: Callable[[], Any], timeout: float, what: str, log: Path | None = None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


class Procs:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.all: list[subprocess.Popen[bytes]] = []

    def start(self, args: list[str], env: dict[str, str], name: str) -> subprocess.Popen[bytes]:
        with (self.tmp / f"{name}.log").open("ab") as fh:
            p = subprocess.Popen(
                args,
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                start_new_session=True,
            )
        self.all.append(p)
        return p

    def stop(self, p: subprocess.Popen[bytes], grace: float = 15.0) -> int:
        """SIGTERM (what `docker compose stop` sends), SIGKILL after `grace`; the exit code."""
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        return p.returncode

    def close(self) -> None:
        for p in self.all:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)


@dataclass
class Native:
    env: dict[str, str]  # the trusted side's environment (the bot's and the ingest's)
    procs: Procs
    tls: Path
    public_url: str


@pytest.fixture
def native(tmp_path: Path) -> Iterator[Native]:
    """The compose file's felab environment, mapped to local PostgreSQL and to a Redis started
    with the compose file's own command line (TLS files from its `tls` service's command);
    processes started in it are killed at teardown."""
    from tests.db_support import new_pg_schema_url

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    values, _ = env_example()
    values = {**values, "FELAB_DISCORD_TOKEN": "set-per-test"}
    env = service_env("ingest", values)
    url, drop = new_pg_schema_url()
    assert env["FELAB_DATABASE_URL"].startswith("postgresql+psycopg://felab:")
    assert env["FELAB_DATABASE_URL"].endswith("@postgres:5432/felab")
    port = _free_port()
    public = f"rediss://127.0.0.1:{port}/0"
    procs = Procs(tmp_path)
    base = {k: v for k, v in os.environ.items() if not k.startswith("FELAB_")}
    base["PYTHONUNBUFFERED"] = "1"
    services = compose()["services"]
    tls = tmp_path / "tls"
    # The `tls` service, once: a CA and a certificate for the public host.
    made = _run(
        [*services["tls"]["command"][:-1], str(tls)],
        {**base, "FELAB_BROKER_PUBLIC_URL": public},
    )
    assert made.returncode == 0 and (tls / "ca.pem").exists(), made.stderr + made.stdout
    # The `redis` service's own command line, with its paths and port mapped here.
    line = services["redis"]["command"][0].replace("$$", "$")
    line = line.replace("/tls/", f"{tls}/").replace("/tmp/users.acl", str(tmp_path / "users.acl"))
    line = line.replace("--tls-port 6380", f"--tls-port {port} --bind 127.0.0.1")
    line = line.replace("--appendonly yes", f"--appendonly no --save '' --dir {tmp_path}")
    redis_proc = procs.start(
        ["sh", "-c", line],
        {**os.environ, "REDIS_ADMIN_PASSWORD": values["REDIS_ADMIN_PASSWORD"]},
        "redis",
    )
    mapped = {
        **env,
        "FELAB_DATABASE_URL": url,
        "FELAB_BROKER_URL": env["FELAB_BROKER_URL"].replace("@redis:6380", f"@127.0.0.1:{port}"),
        "FELAB_BROKER_CA_FILE": str(tls / "ca.pem"),
        "FELAB_BROKER_PUBLIC_URL": public,
        "FELAB_DATA_DIR": str(tmp_path / "data"),
        "FELAB_CONTENT_DIR": str(ROOT / "content"),
    }
    assert values["REDIS_ADMIN_PASSWORD"] in mapped["FELAB_BROKER_URL"]
    try:
        _wait(lambda: _redis_up(mapped, tls), 10, "redis-server", tmp_path / "redis.log")
        yield Native({**base, **mapped}, procs, tls, public)
    finally:
        procs.close()
        assert redis_proc.poll() is not None
        drop()


def _redis_up(env: dict[str, str], tls: Path) -> bool:
    import redis

    try:
        client = redis.Redis.from_url(
            env["FELAB_BROKER_URL"], ssl_ca_certs=str(tls / "ca.pem"), socket_timeout=1
        )
        return bool(client.ping())
    except Exception:
        return False


def _run(
    cmd: list[str], env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    exe = str(BIN / cmd[0])
    return subprocess.run(
        [exe, *cmd[1:]], env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_services_run_natively_with_the_compose_environment(native: Native, tmp_path: Path) -> None:
    from felab_core.db import models as m
    from felab_core.db.session import make_engine, session_factory, session_scope
    from felab_core.db.types import utcnow
    from felab_core.jobs.pairing import issue_pair_code
    from felab_core.people.members import ensure_local_member
    from tests.fakediscord import FakeDiscord

    env, procs = native.env, native.procs
    services = compose()["services"]

    # redis: its health check answers; the default user is off; plain text is not spoken
    check = services["redis"]["healthcheck"]["test"][1]
    check = check.replace("$$", "$").replace("/tls/", f"{native.tls}/")
    check = check.replace("-p 6380", f"-p {native.public_url.rsplit(':', 1)[1].split('/')[0]}")
    if shutil.which("redis-cli"):
        ok = subprocess.run(
            ["sh", "-c", check],
            env={**env, "REDIS_ADMIN_PASSWORD": env_example()[0]["REDIS_ADMIN_PASSWORD"]},
            capture_output=True,
            timeout=30,
        )
        assert ok.returncode == 0, ok.stderr

    # migrate: the one-shot `alembic upgrade head`, then the health check sees a current schema
    out = _run(services["migrate"]["command"], env)
    assert out.returncode == 0, out.stderr + out.stdout
    engine = create_engine(env["FELAB_DATABASE_URL"])
    with engine.connect() as conn:
        assert conn.execute(text("select version_num from alembic_version")).scalar()
    engine.dispose()
    check = _run(services["ingest"]["healthcheck"]["test"][1:], env)
    assert check.returncode == 0 and "(current)" in check.stdout, check.stderr + check.stdout

    # ingest: up; `felab broker setup` prints the pairing URL; a machine pairs with it and
    # leaves with a broker user of its own
    ingest = procs.start([str(BIN / "felab"), *services["ingest"]["command"][1:]], env, "ingest")
    setup = _run(["felab", "broker", "setup", "--json"], env)
    assert setup.returncode == 0, setup.stderr + setup.stdout
    pairing_url = json.loads(setup.stdout)["pairing_url"]
    assert pairing_url.startswith("rediss://felab-pairing:")
    assert pairing_url.endswith("@" + native.public_url.removeprefix("rediss://"))
    engine = make_engine(env["FELAB_DATABASE_URL"])
    sessions = session_factory(engine)
    with session_scope(sessions) as s:
        code = issue_pair_code(s, ensure_local_member(s, now=utcnow()), "gpu-box")
    student = {k: v for k, v in env.items() if not k.startswith("FELAB_")} | {
        "FELAB_BROKER_URL": pairing_url,
        "FELAB_BROKER_CA_FILE": str(native.tls / "ca.pem"),
        "FELAB_DATA_DIR": str(tmp_path / "student"),
    }
    pair = _run(["felab", "worker", "pair", "--code", code, "--timeout", "60"], student, 90)
    assert pair.returncode == 0, pair.stderr + pair.stdout + (tmp_path / "ingest.log").read_text()
    who = _run(["felab", "worker", "identity", "--name", "gpu-box", "--json"], student)
    assert json.loads(who.stdout)["broker_url"].startswith("rediss://felab-machine.")
    with session_scope(sessions) as s:
        assert s.query(m.Worker).filter_by(name="gpu-box").one().public_key
    engine.dispose()
    assert ingest.poll() is None
    assert procs.stop(ingest) is not None

    # bot: connects to (fake) Discord with the compose environment; stops on SIGTERM
    fake = FakeDiscord().start()
    try:
        bot_env = {
            **env,
            **service_env("bot", {**env_example()[0], "FELAB_DISCORD_TOKEN": fake.token}),
        }
        bot_env |= {
            k: env[k]
            for k in (
                "FELAB_DATABASE_URL",
                "FELAB_BROKER_URL",
                "FELAB_DATA_DIR",
                "FELAB_CONTENT_DIR",
            )
        }
        bot_env["FELAB_DISCORD_API_URL"] = fake.api_url  # tests only: the fake, not Discord
        bot = procs.start([str(BIN / "felab"), *services["bot"]["command"][1:]], bot_env, "bot")
        _wait(
            lambda: bool(fake.identifies) or bot.poll() is not None,
            60,
            "the bot to identify",
            tmp_path / "bot.log",
        )
        assert bot.poll() is None, (tmp_path / "bot.log").read_text()
        procs.stop(bot)
        assert bot.poll() is not None
    finally:
        fake.stop()

    # and without a token the bot says what is missing, at once
    no_token = {k: v for k, v in bot_env.items() if k != "FELAB_DISCORD_TOKEN"}
    out = _run(["felab", "bot"], no_token, 60)
    assert out.returncode == 2
    assert "FELAB_DISCORD_TOKEN" in out.stderr + out.stdout
