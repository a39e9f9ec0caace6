"""felab: a lab for field engineers who learn, measure and size LLM serving.

The domain lives here, free of Discord and Celery; `felab_bot` and `felab_worker` are thin
adapters, and `felab` (the command) composes the three.
"""

__version__ = "0.1.0"
