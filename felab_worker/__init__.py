"""The Celery side of the worker fleet: apps, tasks and the dispatcher, thin over felab_core.jobs.

Task bodies decode a message and call felab_core; no rule lives here.
"""
