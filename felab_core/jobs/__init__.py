"""Benchmark jobs on students' machines, as plain functions over a session.

One module a job: `workload` (what a job may ask for; no database, the worker uses it too),
`messages` and `keys` (what travels on the broker, and who signed it), `pairing` (one-time codes
that make a machine a worker), `fleet` (the paired machines, their targets and liveness),
`lifecycle` (the state machine every transition goes through), `queueing` (asking for a job,
cancelling it, listing them), `ingest` (what workers report, applied by the trusted ingest),
`reconciler` (repairing what the broker lost), `outbox` (finished jobs handed to the bot once),
`render` (the one text a finished job is posted as) and `run` (the student machine's side).

The database row is the truth about a job; the broker only carries it. None of these modules
knows Celery or Discord.

States: queued -> running -> done | failed; queued -> expired (no worker started it in time);
queued | running -> cancelled. A run whose worker vanished goes back to queued with a new
attempt (while attempts remain) or fails with that reason. Each send gets a fresh `attempt`
id: an event or a delivery that names another attempt is late, and is dropped.
"""
