"""The embedded worlds that ship in core: SQLite (the default) and memory."""
