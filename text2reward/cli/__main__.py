"""`python -m text2reward.cli ...`, as the `t2r` console script."""

from text2reward.cli import main

main()
