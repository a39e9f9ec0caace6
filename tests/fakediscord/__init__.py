"""A fake Discord API on loopback: the REST routes and the gateway discord.py 2.x uses.

fake = FakeDiscord(); fake.start()          # a thread with its own event loop
env FELAB_DISCORD_API_URL=fake.api_url      # the bot takes its gateway from /gateway/bot
fake.click(message_id, custom_id, user)     # inject INTERACTION_CREATE (a button)
fake.slash("drill", user)                   # inject INTERACTION_CREATE (a slash command)
fake.wait_for(lambda: ..., timeout)         # every request is recorded in fake.requests
"""

from tests.fakediscord.server import FakeDiscord, Payload, Pings, Recorded, User, pings_of

__all__ = ["FakeDiscord", "Payload", "Pings", "Recorded", "User", "pings_of"]
