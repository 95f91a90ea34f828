"""The agent benchmarks/bench_engine.py runs in its worker processes: one long
answer streamed slowly (20 pieces, 0.2 s apart), so a worker can be stopped while
the model's text streams."""

from fxworld import Agent
from fxworld.testing import ScriptedModel

TEXT = " ".join(f"word{i}" for i in range(100))
agent = Agent(ScriptedModel([TEXT], pieces=20, delay=0.2))
