"""`python -m felab`: the felab command, for environments without the console script."""

from felab.cli.entry import main

main()
