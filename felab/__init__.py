"""The `felab` command: the entry layer over felab_core (the domain), felab_bot (Discord) and
felab_worker (Celery). Only this package may import all three; import-linter checks it."""
