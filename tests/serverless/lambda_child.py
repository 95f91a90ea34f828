"""One Lambda invocation in a fresh process: reads the event (JSON) on stdin, calls
``fxworld.aws.lambda_handler(tests.serverless.app.agent)`` with a context whose
time runs out ``argv[1]`` seconds after start, prints the response as JSON."""

from __future__ import annotations

import json
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
    from tests.serverless.app import agent

    handler = lambda_handler(agent, margin=float(sys.argv[2]), lease=float(sys.argv[3]))
    print(json.dumps(handler(json.load(sys.stdin), context)), flush=True)


if __name__ == "__main__":
    main()
