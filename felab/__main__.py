"""`python -m felab`: the felab command, for environments without the console script."""

from felab.cli.main import app

app()
