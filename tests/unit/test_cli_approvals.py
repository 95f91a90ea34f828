"""`fxworld sessions approvals | approve | deny | stop`, as a user runs them."""

from __future__ import annotations

import asyncio
import getpass
import json
from pathlib import Path

import pytest

from fxworld import Agent, SqliteWorld, Tool, tool
from fxworld.cli import main
from fxworld.testing import Reply, ScriptedModel, moved_clock


@tool(needs_approval=True)
def refund_order(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


@tool(needs_approval=True, approval_timeout=0.5)
def pay_out(card: str, api_key: str) -> str:
    """Pay out to a card (waits for a person at most half a second)."""
    return "paid"


def park(db: Path, sid: str, call: Reply | None = None, *tools: Tool) -> None:
    """A turn in ``sid`` that waits for a decision on a refund_order call (or ``call``)."""

    async def go() -> None:
        world = SqliteWorld(db)
        agent = Agent(
            ScriptedModel(
                [call or {"tool": "refund_order", "input": {"order_id": "A-1"}}, "Done."]
            ),
            tools=list(tools) or [refund_order],
            world=world,
        )
        await agent.session(sid).prompt("Refund A-1.").accepted
        await asyncio.wait_for(agent.work(until_idle=True), 30)
        await world.close()

    asyncio.run(go())


def entries(db: Path, sid: str) -> list[tuple[str, dict[str, object]]]:
    async def go() -> list[tuple[str, dict[str, object]]]:
        world = SqliteWorld(db)
        try:
            return [(e.kind, dict(e.data)) for e in await world.read(sid, 0)]
        finally:
            await world.close()

    return asyncio.run(go())


def kinds(db: Path, sid: str) -> list[str]:
    async def go() -> list[str]:
        world = SqliteWorld(db)
        try:
            return [e.kind for e in await world.read(sid, 0)]
        finally:
            await world.close()

    return asyncio.run(go())


def test_list_approve_deny_and_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "w.db"
    url = ["--world", f"sqlite:///{db}"]
    park(db, "s1")
    assert main(["sessions", "approvals", "s1", *url]) == 0
    out, err = capsys.readouterr()
    xid, name, args, *_ = out.split()
    assert name == "refund_order" and args == '{"order_id":"A-1"}' and "expires never" in out
    assert "1 call waiting" in err

    assert main(["sessions", "deny", "s1", "nope", *url]) == 2
    assert "UnknownCall" in capsys.readouterr().err
    assert main(["sessions", "approve", "s1", xid, "--note", "ok", *url]) == 0
    assert capsys.readouterr().out.strip() == f"approved {xid} as cli:{getpass.getuser()}"
    assert main(["sessions", "deny", "s1", xid, "--reason", "late", *url]) == 2
    assert "AlreadyDecided" in capsys.readouterr().err
    assert kinds(db, "s1").count("approval.decided") == 1

    park(db, "s2")
    assert main(["sessions", "stop", "s2", "--reason", "enough", *url]) == 0
    assert "stop requested" in capsys.readouterr().out
    assert kinds(db, "s2")[-1] == "stop.requested"
    assert main(["sessions", "stop", "empty", *url]) == 1  # no such session
    assert "no session 'empty'" in capsys.readouterr().err
    assert kinds(db, "empty") == []


SECRET_INPUT = {"card": "4111 1111 1111 1111", "api_key": "sk-live-0123456789abcdef"}


def test_the_approvals_list_masks_secrets_in_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "w.db"
    park(db, "s1", {"tool": "refund_order", "input": {"order_id": "A-1", **SECRET_INPUT}})
    assert main(["sessions", "approvals", "s1", "--world", f"sqlite:///{db}"]) == 0
    out, err = capsys.readouterr()
    assert "refund_order" in out and '"order_id":"A-1"' in out  # the rest is kept
    for secret in ("4111", "0123456789abcdef", "sk-live"):
        assert secret not in out + err


def test_an_expired_approval_is_refused_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "w.db"
    url = ["--world", f"sqlite:///{db}"]
    park(db, "s1", {"tool": "pay_out", "input": SECRET_INPUT}, pay_out)
    assert main(["sessions", "approvals", "s1", *url]) == 0
    xid = capsys.readouterr().out.split()[0]
    with moved_clock() as clock:
        clock.advance(0.7)  # past expires_at; no worker up
        assert main(["sessions", "approvals", "s1", *url]) == 0
        out, err = capsys.readouterr()
        assert out == "" and "0 calls waiting" in err
        for action in ("approve", "deny"):
            assert main(["sessions", action, "s1", xid, *url]) == 1
            out, err = capsys.readouterr()
            assert out == "" and len(err.splitlines()) == 1, err
            assert xid in err and "expired" in err and "Traceback" not in err
        decided = [k for k in kinds(db, "s1") if k == "approval.decided"]
        assert decided == ["approval.decided"]  # the timeout's denial, written once


def test_a_turn_waiting_for_approval_reads_waiting_for_approval_in_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "w.db"
    url = ["--world", f"sqlite:///{db}"]
    park(db, "parked")
    assert main(["sessions", "show", "parked", *url]) == 0
    assert capsys.readouterr().err == "session 'parked': waiting for approval\n"
    assert main(["sessions", "list", *url]) == 0
    assert capsys.readouterr().out.split("  ")[:2] == ["parked", "waiting for approval"]


def test_decisions_and_stops_record_who_ran_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The actor of a decision or a stop from the CLI: ``cli:<OS user>``, or
    ``--actor``; a bad ``--actor`` is one line, exit 2, and writes nothing. ``show``
    puts the actor and what was said first on the entry's line."""
    db = tmp_path / "w.db"
    url = ["--world", f"sqlite:///{db}"]
    park(db, "s1")
    park(db, "s2")
    xid = next(d["execution_id"] for k, d in entries(db, "s1") if k == "approval.requested")
    before = entries(db, "s1")
    for bad in ("", "   ", "x" * 201, "ops\nforged"):
        assert main(["sessions", "approve", "s1", xid, "--actor", bad, *url]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.splitlines()) == 1 and "actor" in err, err
        assert main(["sessions", "stop", "s1", "--actor", bad, *url]) == 2
        capsys.readouterr()
    assert entries(db, "s1") == before

    assert main(["sessions", "deny", "s1", xid, "--reason", "not eligible", *url]) == 0
    user = f"cli:{getpass.getuser()}"
    assert capsys.readouterr().out.strip() == f"denied {xid} as {user}"
    [(_, denied)] = [x for x in entries(db, "s1") if x[0] == "approval.decided"]
    assert denied["actor"] == user and denied["reason"] == denied["note"] == "not eligible"
    stop_s2 = ["sessions", "stop", "s2", "--reason", "enough", "--actor", "oncall:bob"]
    assert main([*stop_s2, *url]) == 0
    assert "as oncall:bob" in capsys.readouterr().out
    [(_, stop)] = [x for x in entries(db, "s2") if x[0] == "stop.requested"]
    assert (stop["actor"], stop["reason"]) == ("oncall:bob", "enough")

    assert main(["sessions", "show", "s1", *url]) == 0
    [line] = [x for x in capsys.readouterr().out.splitlines() if "approval.decided" in x]
    shown = line.split("  ")[-1]
    said = json.dumps({"actor": user, "note": "not eligible"}, separators=(",", ":"))
    assert shown.startswith(said[:-1] + ",")  # who and what first, then the rest
