"""The engine's back room: the worker's side, private to the engine.

An application never imports from here. :meth:`fxworld.Agent.work` reaches it
(through :class:`~fxworld.engine._run.worker.Worker`), and so does
:mod:`fxworld.testing` (crash points); nothing else outside the engine does, which
``tests/unit/test_import_graph.py`` checks.

- :mod:`.worker`: takes wakes and runs sessions, one :class:`~.run.SessionRun` each;
- :mod:`.run`: one delivery of one session's wake, a loop over the steps that
  :func:`fxworld.engine.replay.next_step` decides, each handed to one handler:
  :mod:`.turn_edges` (start a turn, end it, give up), :mod:`.model_call` (one model
  call, its text saved as it streams), :mod:`.tool_calls` (``tool.started`` before a
  call runs, ``tool.finished`` after), :mod:`.approval_wait` (approvals and stop),
  :mod:`.children` (agents as tools);
- what every handler is handed: :class:`~.state.RunState`, over the
  :class:`~.fenced.FencedWriter` (the only way a run writes), the run's
  :mod:`.signals`, its :mod:`.deadline`, its :mod:`.stop_watch` and its
  telemetry (:mod:`.otel`);
- :mod:`.faults`: deterministic crash points for tests.

"Step" in the engine means one thing: a durable step inside a tool
(:mod:`fxworld.engine.steps`); what a run does next is a handler here. "Context"
means one thing: the session's context (:mod:`fxworld.engine.context`).
"""
