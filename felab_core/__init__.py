"""felab: a lab for field engineers who learn, measure and size LLM serving.

The domain lives here, free of Discord and Celery; `bot/` and `worker/` are thin adapters.
"""

__version__ = "0.1.0"
