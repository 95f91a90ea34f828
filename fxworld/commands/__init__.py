"""One module per ``fxworld`` subcommand, each with ``register(subparsers)``."""
