"""Serverless queues on this machine, for ``fxworld demo --serverless``, the tests
and the benchmark (extra ``fxworld[localqueues]``; not for production).

- :mod:`~fxworld.localqueues.sqs`: moto's SQS server, and what an SQS event source
  mapping does (receive, invoke :func:`fxworld.aws.lambda_handler` in a fresh
  process under a time limit, delete only on success).
- :mod:`~fxworld.localqueues.vercel`: the ``vercel-queue`` SDK's embedded dev
  server, and what Vercel does (POST each push delivery to the wake route, served
  by uvicorn in its own process; start it again after it died; end an invocation
  at the time limit).

The function runs the agent named by ``$FXWORLD_AGENT`` (``module:attribute``).
"""

AGENT_ENV = "FXWORLD_AGENT"
"""The agent a local function runs: ``module:attribute``."""
