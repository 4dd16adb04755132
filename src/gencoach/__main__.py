"""`python -m gencoach`: the same as the `gencoach` command."""

from gencoach.cli import main

main()
