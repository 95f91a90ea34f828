"""One Lambda invocation in a fresh process: reads the event (JSON) on stdin, calls
``fxworld.aws.lambda_handler(agent)`` (``$FXWORLD_AGENT``) with a context whose
time runs out ``argv[1]`` seconds after start, prints the response as JSON."""

from __future__ import annotations

import json
import os
import sys
import time


class Context:
    def __init__(self, limit: float) -> None:
        self.end = time.monotonic() + limit

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.end - time.monotonic()) * 1000))


def main() -> None:
    context = Context(float(sys.argv[1]))
    from fxworld.aws import lambda_handler
    from fxworld.commands.serve import load_agent
    from fxworld.localqueues import AGENT_ENV

    agent = load_agent(os.environ[AGENT_ENV])

    handler = lambda_handler(agent, margin=float(sys.argv[2]), lease=float(sys.argv[3]))
    print(json.dumps(handler(json.load(sys.stdin), context)), flush=True)


if __name__ == "__main__":
    main()
