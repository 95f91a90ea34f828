"""Keys and data keys of an EncryptedWorld under misuse and tampering: no error
ever shows a key, and a data key whose wrapping fails is reported as tampered,
never as shredded."""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
import traceback
from pathlib import Path

import pytest

from fxworld import EncryptedWorld, MemoryWorld, NewEntry, SqliteWorld
from fxworld.encryption import keys_from_env
from fxworld.encryption.datakeys import key_session
from fxworld.errors import ConfigurationError, MissingKey, TamperedEntry

KEY = hashlib.sha256(b"a fixed test key").digest()
B64 = base64.b64encode(KEY).decode()
HEX = KEY.hex()
SHORT_B64 = base64.b64encode(KEY[:24]).decode()  # 32 characters, no padding


def shown_forms() -> list[str]:
    """Every form of the key a message could leak: base64, hex, raw, and any
    8-character piece of the first two."""
    forms = [B64, HEX, repr(KEY), KEY.decode("latin-1"), SHORT_B64]
    for text in (B64, HEX, SHORT_B64):
        forms += [text[i : i + 8] for i in range(len(text) - 7)]
    return forms


def everything_shown(exc: BaseException) -> str:
    """The message and the whole traceback, chained causes and contexts included."""
    return str(exc) + "".join(traceback.format_exception(exc))


MALFORMED_ENV = [
    f"{B64}:prod",  # the pair swapped, with an id that is itself valid base64
    f"{B64}:k1",
    f"k1:{KEY.hex()[:8]},{B64}:main",  # the second pair swapped
    f"{SHORT_B64}:main",  # swapped, the key a valid key id
    f"{SHORT_B64}:k1",
    f"k1:{SHORT_B64}",  # 24 bytes
    HEX,  # hex where base64 belongs: 48 bytes
    f"k1:{HEX}",
    f"{HEX}:k1",
    B64[:-4],  # truncated
    f"k1:{B64[:-8]}",
    f"k1:{B64}x",
    f"k1:{B64.replace('+', '-').replace('/', '_')}x",  # url-safe alphabet
    f"k1:{B64}:extra",
    f"{B64},{B64}",  # the same default id twice
    f"k1 :{B64}",
    f"k1:{B64},,k2:{B64}",
]


@pytest.mark.parametrize(
    "value", MALFORMED_ENV, ids=[f"env-{i}" for i in range(len(MALFORMED_ENV))]
)
def test_an_encryption_key_printed_in_an_error(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34 item 5: no error quotes a value that failed key parsing, in its
    message or its traceback, whatever the mistake."""
    monkeypatch.setenv("FX_TEST_KEYS", value)
    with pytest.raises(ConfigurationError) as info:
        EncryptedWorld.from_env(MemoryWorld(), "FX_TEST_KEYS")
    shown = everything_shown(info.value)
    assert "FX_TEST_KEYS: key number" in str(info.value)
    for form in shown_forms():
        assert form not in shown, (form, str(info.value))
    with pytest.raises(ConfigurationError) as again:
        keys_from_env("FX_TEST_KEYS")
    assert str(again.value) == str(info.value)


@pytest.mark.parametrize(
    "keys",
    [
        {B64: KEY},  # the key text given as the id
        {SHORT_B64 + "=": KEY},
        {HEX: KEY},
        {"k1": B64.encode()},  # base64 bytes where the raw key belongs
        {"k1": KEY[:31]},
        {"k1": KEY, B64: KEY},
    ],
    ids=["key-as-id", "short-key-as-id", "hex-as-id", "base64-bytes", "31-bytes", "second-id"],
)
def test_an_encryption_key_printed_in_an_error_from_a_mapping(keys: dict[str, bytes]) -> None:
    with pytest.raises(ConfigurationError) as info:
        EncryptedWorld(MemoryWorld(), keys)
    shown = everything_shown(info.value)
    for form in shown_forms():
        assert form not in shown, (form, str(info.value))


def test_a_good_environment_value_still_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FX_TEST_KEYS", f" k2:{B64} , k1:{B64}")
    assert keys_from_env("FX_TEST_KEYS") == {"k2": KEY, "k1": KEY}
    monkeypatch.setenv("FX_TEST_KEYS", B64)
    assert keys_from_env("FX_TEST_KEYS") == {"default": KEY}


def swap_rows(path: Path, one: tuple[str, int], two: tuple[str, int]) -> None:
    """Swap the stored kind and data of two entries, as someone with SQL access can."""
    with sqlite3.connect(path) as db:
        query = "SELECT kind, data FROM fx_entries WHERE session_id=? AND seq=?"
        first, second = db.execute(query, one).fetchone(), db.execute(query, two).fetchone()
        update = "UPDATE fx_entries SET kind=?, data=? WHERE session_id=? AND seq=?"
        db.execute(update, (*second, *one))
        db.execute(update, (*first, *two))


async def test_swapped_wrapped_data_keys(tmp_path: Path) -> None:
    """Issue 34 item 12: wrapped data keys swapped between two sessions fail their
    authentication; that is tampering (``TamperedEntry``), never a lawful shred
    (``MissingKey``)."""
    path = tmp_path / "w.db"
    w = EncryptedWorld(SqliteWorld(path), KEY)
    try:
        for sid in ("a", "b"):
            await w.append(sid, [NewEntry("msg", {"of": sid})])
        ka, kb = key_session("default", "a"), key_session("default", "b")
        swap_rows(path, (ka, 1), (kb, 1))
        w.data_keys.forget("a")
        w.data_keys.forget("b")
        for sid in ("a", "b"):
            with pytest.raises(TamperedEntry, match="tampered") as info:
                await w.read(sid)
            assert not isinstance(info.value, MissingKey) and "shredded" not in str(info.value)
        with sqlite3.connect(path) as db:  # mangled fields, not only a failed tag
            db.execute("UPDATE fx_entries SET data=? WHERE session_id=?", (json.dumps({}), ka))
        w.data_keys.forget("a")
        with pytest.raises(TamperedEntry, match="tampered"):
            await w.read("a")
        stored_b = (await w.inner.read("b"))[0].data
        await w.shred("b")  # a lawful shred still says so
        await w.inner.append("b", [NewEntry("msg", stored_b)])  # e.g. from a backup
        with pytest.raises(MissingKey, match="shredded"):
            await w.read("b")
    finally:
        await w.close()
