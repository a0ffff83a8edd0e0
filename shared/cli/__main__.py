"""`python -m shared.cli ...` is `context-engine ...`."""

from shared.cli import main

main()
