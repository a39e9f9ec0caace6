"""`python -m felab_core`: the felab command, for environments without the console script."""

from felab_core.cli.main import app

app()
