"""Storage: the typed models and the one way to get a session (`felab_core.db.session`)."""
