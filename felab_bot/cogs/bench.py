"""`/bench run|status|cancel`, `/worker pair|list`, and the outbox loop that posts results.

Glue only: felab_bot/bench.py holds what is said and which service is called. `/bench run` always
acknowledges first (the database and the broker may take a moment), then follows up. The
outbox loop posts each finished job once: in the cohort's channel, or to the member alone
(a direct message) when they keep their numbers off leaderboards.
"""

from __future__ import annotations

import asyncio
import io
import logging
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands, tasks

from felab_bot import bench, people
from felab_bot.cogs.common import Out, now, respond, who
from felab_bot.host import Host, host_of
from felab_core.errors import ServiceError

log = logging.getLogger(__name__)


class BenchCog(commands.Cog, name="Bench"):
    bench_group = app_commands.Group(name="bench", description="Benchmarks on your own Mac")
    worker_group = app_commands.Group(name="worker", description="Your Macs that run benchmarks")

    def __init__(self, bot: Host) -> None:
        self.bot = bot

    async def cog_load(self) -> None:
        if self.bot.run_loops:
            self.outbox_loop.change_interval(seconds=self.bot.settings.discord_outbox_every_s)
            self.outbox_loop.start()

    async def cog_unload(self) -> None:
        self.outbox_loop.cancel()

    # ------------------------------------------------------------------ /bench

    @bench_group.command(name="run", description="Benchmark servers on your paired Mac")
    @app_commands.describe(
        targets="Server names from your worker's targets file, such as: mlx llamacpp",
        worker="Which of your Macs (needed when you have several)",
        preset="The measurement preset (default day2)",
        concurrency="Conversations at once",
        requests="Requests per run",
        max_tokens="Longest reply, in tokens",
        spread="Spread one target's run over this many of your machines (one load test)",
    )
    async def run(
        self,
        interaction: discord.Interaction[Any],
        targets: str,
        worker: str | None = None,
        preset: str = "day2",
        concurrency: app_commands.Range[int, 1, 256] | None = None,
        requests: app_commands.Range[int, 1, 10000] | None = None,
        max_tokens: app_commands.Range[int, 1, 32768] | None = None,
        spread: app_commands.Range[int, 2, 16] | None = None,
    ) -> None:
        given = {"concurrency": concurrency, "requests": requests, "max_tokens": max_tokens}
        params = {k: v for k, v in given.items() if v is not None}

        async def work() -> Out:
            text = await self.bot.db(
                bench.bench,
                who(interaction),
                targets,
                worker=worker,
                preset=preset,
                params=params,
                send=self.bot.job_sender(),
                now=now(),
                spread=spread,
            )
            return Out(text)

        await respond(interaction, work(), defer=True)

    @run.autocomplete("worker")
    async def _workers(
        self, interaction: discord.Interaction[Any], current: str
    ) -> list[app_commands.Choice[str]]:
        try:
            names = await self.bot.db(bench.worker_names, who(interaction), current, now())
        except ServiceError:  # not in a cohort's channel: nothing to offer
            return []
        return [app_commands.Choice(name=n, value=n) for n in names]

    @run.autocomplete("targets")
    async def _targets(
        self, interaction: discord.Interaction[Any], current: str
    ) -> list[app_commands.Choice[str]]:
        chosen = getattr(interaction.namespace, "worker", None)
        try:
            names = await self.bot.db(
                bench.target_names,
                who(interaction),
                str(chosen) if chosen else None,
                current,
                now(),
            )
        except ServiceError:
            return []
        return [app_commands.Choice(name=n, value=n) for n in names]

    @bench_group.command(name="status", description="Your latest benchmark jobs")
    async def status(self, interaction: discord.Interaction[Any]) -> None:
        async def work() -> Out:
            return Out(await self.bot.db(bench.status, who(interaction), now()))

        await respond(interaction, work())

    @bench_group.command(name="cancel", description="Cancel a queued or running job")
    @app_commands.describe(job="The job's number (/bench status)")
    async def cancel(self, interaction: discord.Interaction[Any], job: int) -> None:
        async def work() -> Out:
            done = await self.bot.db(bench.cancel, who(interaction), job, now())
            for job_id, worker_id in done.deliveries:
                await asyncio.to_thread(self.bot.cancel_job, job_id, worker_id)
            return Out(done.text)

        await respond(interaction, work())

    # ------------------------------------------------------------------ /worker

    @worker_group.command(name="pair", description="A one-time code to pair a Mac as a worker")
    @app_commands.describe(
        name="A name for that Mac, such as studio-mbp",
        allow_instructors="May your cohort's instructors run benchmarks on it?",
    )
    async def pair(
        self, interaction: discord.Interaction[Any], name: str, allow_instructors: bool = False
    ) -> None:
        async def work() -> Out:
            return Out(
                await self.bot.db(bench.pair, who(interaction), name, allow_instructors, now())
            )

        await respond(interaction, work())

    @worker_group.command(name="list", description="Your paired Macs, online or not")
    async def list_(self, interaction: discord.Interaction[Any]) -> None:
        async def work() -> Out:
            return Out(await self.bot.db(bench.workers, who(interaction), now()))

        await respond(interaction, work())

    # ------------------------------------------------------------------ the outbox

    @tasks.loop(seconds=5)
    async def outbox_loop(self) -> None:
        try:
            await self.post_results()
        except Exception:
            log.exception("posting results failed; trying again at the next look")

    @outbox_loop.before_loop
    async def _wait_ready(self) -> None:
        await self.bot.wait_until_ready()

    async def _where(self, post: bench.ResultPost) -> discord.abc.Messageable:
        if post.private or post.channel_id is None:
            user = self.bot.get_user(post.user_id) or await self.bot.fetch_user(post.user_id)
            return user
        channel = self.bot.get_channel(post.channel_id)
        if channel is None:
            channel = await self.bot.fetch_channel(post.channel_id)
        if not isinstance(channel, discord.abc.Messageable):
            raise TypeError(f"channel {post.channel_id} cannot hold messages")
        return channel

    async def post_results(self) -> int:
        """Post every claimed result once. Only the machine's owner may be pinged (the post is
        about their machine); nothing else in it, a model name included, can ping anyone. A
        post Discord refuses is tried again later, then set aside as a dead letter."""
        count = 0
        for post in await self.bot.db(bench.claim_results, now()):
            job = post.job
            files = []
            if job.chart_png:
                files.append(discord.File(io.BytesIO(job.chart_png), filename=job.chart_name))
            if job.csv:
                files.append(discord.File(io.BytesIO(job.csv.encode()), filename=job.csv_name))
            owner = [discord.Object(id=post.user_id)] if post.user_id else False
            mentions = discord.AllowedMentions(everyone=False, roles=False, users=owner)
            try:
                where = await self._where(post)
                msg = await where.send(job.text, files=files, allowed_mentions=mentions)
            except discord.Forbidden as exc:
                if not (post.private or post.channel_id is None):
                    await self._refused(post, f"no access to channel {post.channel_id}: {exc}")
                    continue
                # The member accepts no direct messages: trying again would not help, and
                # `/bench status` still shows the job.
                log.warning(
                    "job %s: %s refuses direct messages (%s)", job.job_id, post.user_id, exc
                )
                await self.bot.db(bench.posted, post.outbox_id, "dm-refused", now())
                continue
            except (discord.HTTPException, TypeError) as exc:
                await self._refused(post, f"{type(exc).__name__}: {exc}")
                continue
            await self.bot.db(bench.posted, post.outbox_id, str(msg.id), now())
            await self.bot.db(  # theirs: deleting their data deletes it too
                people.posted_about, post.member_id, msg.channel.id, msg.id,
                "benchmark result", now(),
            )  # fmt: skip
            count += 1
        return count

    async def _refused(self, post: bench.ResultPost, error: str) -> None:
        dead = await self.bot.db(bench.post_refused, post.outbox_id, error, now())
        if dead:
            log.error(
                "job %s could not be posted (%s); set aside: `felab worker outbox` lists it",
                post.job.job_id,
                error,
            )
        else:
            log.warning(
                "could not post job %s (%s); it is tried again later", post.job.job_id, error
            )


async def setup(bot: commands.Bot) -> None:
    """Load this extension: its cog."""
    await bot.add_cog(BenchCog(host_of(bot)))
