"""`python -m bot.cli`: the `gpubot` command where the console script is not installed."""

from bot.cli import main

raise SystemExit(main())
