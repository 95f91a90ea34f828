"""A tool call as one card of the inspector's timeline, told as one story.

Every entry of one call (its execution id) goes into its card, which is drawn
again, whole, in the place of its first ``tool.started``: the call's input, its
durable steps in order (``step.started``/``step.finished``, :mod:`fxworld.engine.steps`),
its child session (an agent tool's ``child.started``/``child.finished``), what
its thread did after the call was cut (``tool.late``) and how it ended
(``tool.finished``, ``tool.interrupted``). Each step says its state:

- **finished**: its ``step.finished`` is saved, with its result (or the error
  that kept the result from being saved: its effect ran);
- **interrupted**: started, and the call ended (a crash, a stop, a timeout)
  before it finished: it may have partly run;
- **running**: started, in a call that runs;
- **never reached**: a step that earlier calls of the same tool on this page
  ran, and this call, ended, did not start.

A line under the steps says plainly what ran and what may have partly run. A
call whose turn ended while it was open says so instead of waiting for ever (an
agent tool's card no longer "waits for its child" once its turn was stopped),
and a child's report that comes after its turn ended goes into its call's card,
marked as late: the model did not hear it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fxworld.engine import log

from ._html import Shown, entry_head, esc, seconds, session_link, value_html
from ._values import pointer

__all__ = ["Call", "Step", "CALL_KINDS", "step_card"]

CALL_KINDS = frozenset(
    {
        log.TOOL_STARTED,
        log.STEP_STARTED,
        log.STEP_FINISHED,
        log.TOOL_LATE,
        log.TOOL_FINISHED,
        log.TOOL_INTERRUPTED,
        log.CHILD_STARTED,
        log.CHILD_FINISHED,
    }
)
"""The kinds that go into their call's card (by ``execution_id``)."""

_ENDS = (log.TOOL_FINISHED, log.TOOL_INTERRUPTED, log.CHILD_FINISHED)
_CUT = {log.TURN_STOPPED: "stopped", log.TURN_FAILED: "failed", log.TURN_FINISHED: "finished"}


@dataclass
class Step:
    """One durable step of a call, as far as the log says."""

    name: str
    started: Shown | None = None
    finished: Shown | None = None
    late: Shown | None = None  # its sync function ended in its thread after the call was cut


@dataclass
class Call:
    """One tool call, from its first ``tool.started`` on (``group``: its turn's group)."""

    session_id: str
    started: Shown
    since: str
    group: str
    latest: Shown | None = None  # the latest tool.started (attempt 2, 3...)
    steps: dict[str, Step] = field(default_factory=dict)
    child: Shown | None = None
    end: Shown | None = None
    late: list[Shown] = field(default_factory=list)  # the tool's own tool.late
    cut: str = ""  # the turn end that came while the call was open
    ended_turn: bool = False  # its turn has ended (what comes now is late)
    _drawn: dict[tuple[int, str], str] = field(default_factory=dict, init=False, repr=False)

    def _value(self, item: Shown, at: str, value: object) -> str:
        """Value ``at`` of entry ``item`` as a page shows it, drawn once (the card is
        drawn again at each entry of the call; a large value is measured once)."""
        key = (item.seq, at)
        if key not in self._drawn:
            self._drawn[key] = value_html(value, self.session_id, item.seq, at)
        return self._drawn[key]

    @property
    def card_id(self) -> str:
        return f"e{self.started.seq}"

    @property
    def name(self) -> str:
        return str(self.started.data.get("name"))

    @property
    def child_id(self) -> str:
        """Its child session's id ("" before its ``child.started``)."""
        return "" if self.child is None else str(self.child.data.get("session"))

    @property
    def open(self) -> bool:
        return self.end is None and not self.cut

    def take(self, item: Shown) -> None:
        """Fold ``item``, an entry of this call, in."""
        kind, d = item.kind, item.data
        if kind == log.TOOL_STARTED:
            self.latest = item
        elif kind in (log.STEP_STARTED, log.STEP_FINISHED):
            step = self.steps.setdefault(str(d.get("step")), Step(str(d.get("step"))))
            if kind == log.STEP_STARTED:
                step.started = step.started or item
            else:
                step.finished = item
        elif kind == log.TOOL_LATE:
            name = d.get("step")
            if isinstance(name, str):
                self.steps.setdefault(name, Step(name)).late = item
            else:
                self.late.append(item)
        elif kind == log.CHILD_STARTED:
            self.child = item
        elif kind in _ENDS:
            self.end = item

    def turn_ended(self, kind: str) -> None:
        """Its turn ended (``kind``); a call still open then was cut by it."""
        if self.open:
            self.cut = kind
        self.ended_turn = True

    # -- drawing ------------------------------------------------------------------

    def html(self, known_steps: Sequence[str] = (), *, asking: bool = False) -> str:
        """The call's card. ``known_steps``: the steps earlier calls of this tool ran,
        in order (those this call, ended, did not start were never reached);
        ``asking``: a call waits for a decision in its child session."""
        s, d = self.started, self.started.data
        last = self._last()
        notes = self._notes(asking)
        kinds = esc(s.kind) if last is s else f"{esc(s.kind)} → {esc(last.kind)}"
        seqs = str(s.seq) if last is s else f"{s.seq} → #{last.seq}"
        classes = "entry k-tool-started"
        if last is not s:
            classes += f" k-{esc(last.kind.replace('.', '-'))}"
        if self.cut:
            classes += " cut"
        never = [] if self.open else [n for n in known_steps if n not in self.steps]
        body = (
            f"<b>{esc(d.get('name'))}</b>"
            f"{self._value(s, pointer('input'), d.get('input'))}"
            f'<div class="eid">execution {esc(d.get("execution_id"))}</div>'
            f"{self._steps_html(never)}{self._story(never)}{self._result()}"
        )
        return (
            f'<li class="{classes}" id="{self.card_id}" data-seq="{last.seq}"'
            f' data-eid="{esc(d.get("execution_id"))}">'
            f"{entry_head(seqs, s, self.since, kinds, notes)}"
            f'<div class="body">{body}</div></li>'
        )

    def _last(self) -> Shown:
        seen = [self.started, self.latest, self.child, self.end]
        return max((x for x in seen if x is not None), key=lambda x: x.seq)

    def _notes(self, asking: bool) -> str:
        notes = []
        attempt = (self.latest or self.started).data.get("attempt")
        if isinstance(attempt, int) and attempt > 1:
            notes.append(("warn", f"ran again after a crash (attempt {attempt})"))
        end = self.end
        took = "" if end is None else seconds((end.at - self.started.at).total_seconds())
        if end is not None and end.kind == log.TOOL_INTERRUPTED:
            notes.append(("warn", f"interrupted: not run again ({took} after its start)"))
        elif end is not None:
            bad = end.data.get("is_error") is True
            notes.append(("bad" if bad else "ok", f"{'error' if bad else 'ok'} in {took}"))
            if end.kind == log.CHILD_FINISHED and self.cut:
                notes.append(("warn", "its child answered after its turn ended"))
        elif self.cut:
            what = "its child answered" if self.child is not None else "it returned"
            notes.append(("warn", f"its turn {_CUT.get(self.cut, 'ended')} before {what}"))
        elif self.child is not None and asking:
            notes.append(("wait", "waits for its child session, which waits for approval"))
        elif self.child is not None:
            notes.append(("wait", "waits for its child session"))
        else:
            notes.append(("run", "running"))
        running = None if end is None else end.data.get("running")
        if isinstance(running, list) and running:  # a thread of it was not stopped
            what = ", ".join(str(p) for p in running)
            notes.append(("warn", f"still running in its thread: {what}"))
        return "".join(f' <span class="badge {css}">{esc(word)}</span>' for css, word in notes)

    def _steps_html(self, never: Sequence[str]) -> str:
        if not self.steps and not never:
            return ""
        items = [self._step_html(n, step) for n, step in enumerate(self.steps.values(), 1)]
        first = len(items) + 1
        items += [
            f'<li class="step s-never"><span class="step-n">{n}.</span>'
            f' <b class="step-name">{esc(name)}</b>'
            ' <span class="step-state">never reached</span></li>'
            for n, name in enumerate(never, first)
        ]
        return f'<ol class="steps" aria-label="durable steps">{"".join(items)}</ol>'

    def _step_html(self, n: int, step: Step) -> str:
        state, css, detail = "running", "s-running", ""
        if step.finished is not None:
            f = step.finished
            if "error" in f.data:
                state, css = "ran; its result could not be saved", "s-error"
                detail = f'<div class="said">{esc(f.data.get("error"))}</div>'
            else:
                state, css = "finished", "s-finished"
                detail = self._value(f, pointer("result"), f.data.get("result"))
        elif step.late is not None:
            late = step.late
            state, css = "finished in its thread after the call was cut", "s-late"
            detail = self._value(late, pointer("output"), late.data.get("output"))
        elif not self.open:
            state, css = "interrupted: started, never finished; it may have partly run", "s-cut"
        seqs = " ".join(f"#{x.seq}" for x in (step.started, step.finished, step.late) if x)
        return (
            f'<li class="step {css}"><span class="step-n">{n}.</span>'
            f' <b class="step-name">{esc(step.name)}</b> <span class="step-state">{state}</span>'
            f' <span class="seq">{seqs}</span>{detail}</li>'
        )

    def _story(self, never: Sequence[str]) -> str:
        """What ran, and what may have partly run, in words."""
        done = [n for n, s in self.steps.items() if s.finished is not None or s.late is not None]
        partly = [n for n, s in self.steps.items() if s.finished is None and s.late is None]
        said = []
        if self.steps or never:
            if done:
                said.append(f"Ran: {', '.join(done)}.")
            if partly and not self.open:
                said.append(f"May have partly run: {', '.join(partly)}.")
            elif partly:
                said.append(f"Running now: {', '.join(partly)}.")
            if never:
                said.append(f"Never reached: {', '.join(never)}.")
        end = self.end
        if end is not None and end.kind == log.TOOL_INTERRUPTED:
            said.append(
                "The tool was started and its process stopped before it returned: "
                "it may have partly run, and it was not run again."
            )
        elif self.cut and self.child is not None and end is None:
            said.append(
                f"Its turn {_CUT.get(self.cut, 'ended')} while the call waited for its child"
                " session; the child was asked to stop. Nothing waits for it now."
            )
        elif self.cut and end is None:
            said.append(
                f"Its turn {_CUT.get(self.cut, 'ended')} before the tool returned:"
                " it may have partly run."
            )
        if not said:
            return ""
        return f'<div class="story">{esc(" ".join(said))}</div>'

    def _result(self) -> str:
        end, child = self.end, self.child
        parts = []
        if child is not None and end is None and not self.cut:
            link = session_link(child.data.get("session"), "child")
            parts.append(f'<div class="text">runs in the child session {link}</div>')
        elif child is not None and end is None:
            link = session_link(child.data.get("session"), "child")
            parts.append(f'<div class="text">its child session {link} did not answer</div>')
        if end is not None and end.kind == log.TOOL_INTERRUPTED:
            parts.append(f'<div class="text">{esc(end.data.get("message", ""))}</div>')
        elif end is not None:
            output = self._value(end, pointer("output"), end.data.get("output"))
            bad = end.data.get("is_error") is True
            if end.kind == log.CHILD_FINISHED:
                link = session_link(end.data.get("session"), "child")
                after = " after its turn ended (the model did not hear it)" if self.cut else ""
                parts.append(f"its child session {link} answered{after}{output}")
            else:
                parts.append(f"{'raised' if bad else 'returned'}{output}")
        for x in self.late:
            output = self._value(x, pointer("output"), x.data.get("output"))
            parts.append(
                f'<div class="late">#{x.seq}: ended in its thread after its call was cut'
                f"{output}</div>"
            )
        return f'<div class="result">{"".join(parts)}</div>' if parts else ""


def step_card(item: Shown, since: str, session_id: str) -> str:
    """A step entry whose call's ``tool.started`` is not on the page (it starts
    before the page's first entry): a card of its own, in words."""
    d = item.data
    if item.kind == log.STEP_STARTED:
        body = f"step <b>{esc(d.get('step'))}</b> started"
    elif "error" in d:
        error = esc(d.get("error"))
        body = f"step <b>{esc(d.get('step'))}</b> ran; its result could not be saved: {error}"
    else:
        result = value_html(d.get("result"), session_id, item.seq, pointer("result"))
        body = f"step <b>{esc(d.get('step'))}</b> finished{result}"
    body += f'<div class="eid">execution {esc(d.get("execution_id"))}</div>'
    kind = esc(item.kind.replace(".", "-"))
    return (
        f'<li class="entry k-{kind}" id="e{item.seq}" data-seq="{item.seq}"'
        f' data-eid="{esc(d.get("execution_id"))}">'
        f"{entry_head(str(item.seq), item, since, esc(item.kind), '')}"
        f'<div class="body">{body}</div></li>'
    )
