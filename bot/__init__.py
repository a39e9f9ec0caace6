"""The Discord bot: thin cogs that turn Discord events into felab_core service calls.

bot/app.py        the client: settings, database, cogs, command sync on request only
bot/endpoints.py  where Discord is (the real one, or a fake one for tests)
bot/drills.py     what the drills cog says and which services it calls (no discord import)
bot/numbers.py    /numbers: the day's fields, entering (checked, flagged) and the table
bot/bench.py      /bench and /worker, and laying out finished jobs from the outbox
bot/people.py     instructors' /leaderboard and /progress, and /me
bot/setup.py      /setup (a cohort in a channel, its members) and /join
bot/speak.py      /speak: the say-it-aloud prompt, a spoken answer, peers' ratings
bot/cogs/         one cog per feature, Discord glue only
"""
