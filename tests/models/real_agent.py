"""The agent the model end-to-end tests run in worker subprocesses.

Its model is a model string from ``REAL_MODEL`` (``openai/gpt-test`` or
``anthropic/claude-test``), resolved with the SDKs' standard environment
variables, which the test points at its local provider server.
"""

from __future__ import annotations

import os

from fxworld import Agent, tool


@tool(idempotent=True)
def get_order(id: str) -> dict[str, str]:
    """Look up an order."""
    return {"id": id, "status": "shipped"}


agent = Agent(
    os.environ["REAL_MODEL"],
    tools=[get_order],
    instructions="You answer questions about orders.",
    text_chunk_interval=0.0,  # every streamed piece is saved as its own chunk
)
