"""fxworld under the frameworks people already use.

- :mod:`fxworld.integrations.langgraph`: ``WorldSaver``, a LangGraph checkpointer on
  any World (extra ``fxworld[langgraph]``).
- :mod:`fxworld.integrations.openai_agents`: ``WorldSession``, an OpenAI Agents SDK
  session on any World (extra ``fxworld[openai-agents]``).

Each framework is imported only inside its own module, so importing this package
imports neither.
"""
