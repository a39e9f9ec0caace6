"""The Discord bot: thin cogs that turn Discord events into felab_core service calls.

felab_bot/app.py        the client: settings, database, cogs, command sync on request only
felab_bot/endpoints.py  where Discord is (the real one, or a fake one for tests)
felab_bot/drills.py     what the drills cog says and which services it calls (no discord import)
felab_bot/numbers.py    /numbers: the day's fields, entering (checked, flagged) and the table
felab_bot/bench.py      /bench and /worker, and laying out finished jobs from the outbox
felab_bot/people.py     instructors' /leaderboard and /progress, and /me
felab_bot/setup.py      /setup (a cohort in a channel, its members) and /join
felab_bot/speak.py      /speak: the say-it-aloud prompt, a spoken answer, peers' ratings
felab_bot/cogs/         one cog per feature, Discord glue only
"""
