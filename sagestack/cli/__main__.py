"""`python -m sagestack.cli`: the same as the `sagestack` command."""

from sagestack.cli import main

main()
