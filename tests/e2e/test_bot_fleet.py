"""The whole loop with real processes and no servers to run: the bot against the fake Discord,
`felab worker ingest` and `felab worker start` on the embedded broker (SQLite), a scripted MLX.

/worker pair gives the code the Mac redeems; /bench run queues on it; the worker measures; the
ingest records the result and fills the outbox; the bot posts it once, with chart and CSV. The
Mac reports its targets' names (pairing and heartbeats): `targets` autocompletes them, and a
target its targets file lacks is refused at once, before anything is queued.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import select

from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.jobs.render import render_job
from felab_core.lab.scripted_server import Script, ScriptedServer
from tests.e2e.fleet import FAST, spawn
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
        shared = {**world.env(), **FAST, "FELAB_DISCORD_OUTBOX_EVERY_S": "0.3"}
        world.env = lambda: shared  # type: ignore[method-assign]
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
        procs.append(spawn([FELAB, "worker", "ingest"], shared, tmp_path / "ingest.log"))
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
                [FELAB, "worker", "start", "--name", "studio", "--pool", "solo"],
                student,
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
        assert "serving `@everyone <@&1>`" in str(good["content"])
        # Only Ada, whose machine it is, may be pinged by it; nothing else in it can ping.
        mentions = good["_allowed_mentions"]
        assert isinstance(mentions, dict) and mentions.get("parse") == []
        assert [str(u) for u in mentions.get("users", [])] == [ADA.id] and not mentions.get("roles")
        files = attachments(world, good)
        assert files[f"felab-job{ids[0]}.png"].startswith(b"\x89PNG")
        assert b"writing_tps_p50" in files[f"felab-job{ids[0]}.csv"]
        with session_scope(world.sessions) as s:
            rows = s.scalars(select(m.JobOutbox).order_by(m.JobOutbox.job_id)).all()
            assert [r.posted_at is not None for r in rows] == [True]
        assert len(posted(ids[0])) == 1
    finally:
        for p in procs:
            p.kill()
        srv.stop_thread()
        for name in ("ingest.log", "worker.log"):
            log = tmp_path / name
            if log.exists():
                print(f"--- {name} ---\n{log.read_text(errors='replace')[-3000:]}")
