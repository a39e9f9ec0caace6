"""Operating felab itself: its own metrics, its logs, the fleet's status at a glance, backups.

The course teaches students to read a server's /metrics and logs before trusting it; felab's
own processes (the bot, the ingest, each worker) offer the same.
"""
