"""The whole loop with real processes and no servers to run: the bot against the fake Discord,
`felab worker ingest` and `felab worker start` on the embedded broker (SQLite), a scripted MLX.

/worker pair gives the code the Mac redeems; /bench run queues on it; the worker measures; the
ingest records the result and fills the outbox; the bot posts it once, with chart and CSV. The
Mac reports its targets' names (pairing and heartbeats): `targets` autocompletes them, and a
target its targets file lacks is refused at once, before anything is queued.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest
from sqlalchemy import select

from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.jobs.render import render_job
from felab_core.lab.scripted_server import Script, ScriptedServer
from tests.e2e.fleet import FAST, free_port, spawn
from tests.e2e.test_bot_commands import answered, attachments, followed_up, opt, reply, sub
from tests.e2e.test_bot_process import (  # noqa: F401 (the `world` fixture)
    ADA,
    FELAB,
    ROOT,
    BotWorld,
    world,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def test_bench_from_chat_to_a_posted_result(world: BotWorld, tmp_path: Path) -> None:  # noqa: F811
    fake = world.fake
    srv = ScriptedServer(Script(persona="mlx")).start_in_thread()
    procs = []
    try:
        # JSON logs everywhere, and each process's own metrics port.
        shared = {
            **world.env(),
            **FAST,
            "FELAB_DISCORD_OUTBOX_EVERY_S": "0.3",
            "FELAB_LOG_FORMAT": "json",
        }
        ports = {name: free_port() for name in ("bot", "ingest", "worker")}
        world.env = lambda: {**shared, "FELAB_METRICS_PORT": str(ports["bot"])}  # type: ignore[method-assign]
        mac = tmp_path / "mac"
        mac.mkdir()
        # The Mac's model is named to ping the whole server: text from a machine never pings.
        (mac / "targets.toml").write_text(
            f'[targets.mlx]\nurl = "http://127.0.0.1:{srv.port}"\nmodel = "@everyone <@&1>"\n'
        )
        # The Mac shares only the broker (the embedded one is a file in FELAB_DATA_DIR).
        student = {
            **{k: v for k, v in shared.items() if k != "FELAB_DATABASE_URL"},
            "FELAB_TARGETS_FILE": str(mac / "targets.toml"),
        }
        out = subprocess.run(
            [FELAB, "bot", "sync", "--guild", fake.guild_id],
            env=shared,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert out.returncode == 0, out.stderr
        ingest_env = {**shared, "FELAB_METRICS_PORT": str(ports["ingest"])}
        procs.append(spawn([FELAB, "worker", "ingest"], ingest_env, tmp_path / "ingest.log"))
        world.start_bot()
        world.wait(fake.connected, 20, "the bot to log in")

        text = reply(world, fake.slash("worker", ADA, options=sub("pair", opt("name", "studio"))))
        code = re.search(r"--code ([0-9A-F-]{20})", text["content"])
        assert code is not None, text["content"]
        paired = subprocess.run(
            [FELAB, "worker", "pair", "--code", code.group(1), "--timeout", "30"],
            env=student,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert paired.returncode == 0, paired.stderr + paired.stdout
        procs.append(
            spawn(
                [FELAB, "worker", "start", "--name", "studio", "--pool", "prefork"],
                {**student, "FELAB_METRICS_PORT": str(ports["worker"])},
                tmp_path / "worker.log",
            )
        )

        def online() -> bool:
            text = reply(world, fake.slash("worker", ADA, options=sub("list")))["content"]
            return "**studio**: online" in text

        world.wait(online, 30, "the worker online in /worker list")

        # While she types `targets`, the bot offers the names her Mac reported.
        typing = {**opt("targets", "mlx ll"), "focused": True}
        it = fake.slash("bench", ADA, options=sub("run", typing), autocomplete=True)
        resp = answered(world, it)
        assert resp["type"] == 8
        assert resp["data"]["choices"] == [{"name": "mlx llamacpp", "value": "mlx llamacpp"}]

        # A target the Mac lacks: refused at once, privately (followed_up checks the deferral
        # is ephemeral), and nothing is queued.
        refused = followed_up(
            world,
            fake.slash(
                "bench",
                ADA,
                options=sub("run", opt("targets", "mlx mlx2"), opt("preset", "quick")),
            ),
        )
        assert "your machine studio has no target mlx2; it has: " in refused["content"]
        assert "mlx, ollama" in refused["content"], refused["content"]
        with session_scope(world.sessions) as s:
            assert s.scalars(select(m.BenchJob)).all() == []

        queued = followed_up(
            world,
            fake.slash(
                "bench", ADA, options=sub("run", opt("targets", "mlx"), opt("preset", "quick"))
            ),
        )["content"]
        ids = [int(i) for i in re.findall(r"Job (\d+):", queued)]
        assert len(ids) == 1, queued

        def posted(job_id: int) -> list[dict[str, object]]:
            return [p for p in world.channel() if f"**Benchmark {job_id}**" in str(p["content"])]

        [good] = world.wait(lambda: posted(ids[0]), 90, "the mlx result in the channel")
        with session_scope(world.sessions) as s:
            job = s.get(m.BenchJob, ids[0])
            assert job is not None
            # Byte for byte the text felab_core.jobs.render makes (what `felab demo` prints).
            assert good["content"] == render_job(s, job).text
        assert ": done" in str(good["content"]) and "`mlx`" in str(good["content"])
        # (shown as typed, with a zero-width space after each @ so it cannot even look like one)
        assert "serving `@\u200beveryone <@\u200b&1>`" in str(good["content"])
        # Only Ada, whose machine it is, may be pinged by it; nothing else in it can ping.
        mentions = good["_allowed_mentions"]
        assert isinstance(mentions, dict) and mentions.get("parse") == []
        assert [str(u) for u in mentions.get("users", [])] == [ADA.id] and not mentions.get("roles")
        files = attachments(world, good)
        assert files[f"felab-job{ids[0]}.png"].startswith(b"\x89PNG")
        assert b"writing_tps_p50" in files[f"felab-job{ids[0]}.csv"]

        def posted_flags() -> list[bool] | None:
            # The message is in the channel a moment before the outbox row records it.
            with session_scope(world.sessions) as s:
                rows = s.scalars(select(m.JobOutbox).order_by(m.JobOutbox.job_id)).all()
                flags = [r.posted_at is not None for r in rows]
            return flags if all(flags) else None

        assert world.wait(posted_flags, 10, "the outbox row marked posted") == [True]
        assert len(posted(ids[0])) == 1

        # Each process's own /metrics holds the counts of what just happened.
        ingest_m = scrape(ports["ingest"])
        assert ingest_m[("felab_jobs_total", (("status", "done"),))] >= 1
        assert ingest_m[("felab_job_queue_seconds_count", ())] >= 1
        assert ingest_m[("felab_job_run_seconds_count", ())] >= 1
        assert any(name == "felab_worker_heartbeat_age_seconds" for name, _ in ingest_m)
        bot_m = scrape(ports["bot"])
        commands = {dict(labels).get("command") for name, labels in bot_m
                    if name == "felab_interaction_seconds_count"}  # fmt: skip
        assert {"bench run", "worker pair"} <= commands, commands
        assert bot_m[("felab_outbox_pending", ())] == 0
        worker_m = scrape(ports["worker"])  # counted in the pool child, served by the main one
        assert worker_m[("felab_worker_jobs_total", (("outcome", "ran"),))] >= 1
        # Every log line of every process is one JSON object, and no secret is in any.
        for name in ("ingest.log", "worker.log", "bot.log"):
            text = (world.tmp if name == "bot.log" else tmp_path).joinpath(name).read_text()
            lines = [line for line in text.splitlines() if line.strip()]
            assert lines, name
            for line in lines:
                assert isinstance(json.loads(line), dict), (name, line)
            assert fake.token not in text, name
    finally:
        for p in procs:
            p.kill()
        srv.stop_thread()
        for name in ("ingest.log", "worker.log"):
            log = tmp_path / name
            if log.exists():
                print(f"--- {name} ---\n{log.read_text(errors='replace')[-3000:]}")


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A process's /metrics, parsed by prometheus-client's own parser."""
    from prometheus_client.parser import text_string_to_metric_families

    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }
