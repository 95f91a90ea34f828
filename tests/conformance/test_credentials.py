"""The kit's credential check (W16) finds a password where it would leak and
nowhere else: a password equal to the user name or the database is no leak where
the user or the database is named."""

from __future__ import annotations

import pytest

from fxworld_conformance.credentials import leak, password_of

SAME = "postgresql://fxworld:fxworld@127.0.0.1:5432/fxworld"
OWN = "postgresql://app:s3cr3t-pw@db.example:5432/app"


@pytest.mark.parametrize(
    ("url", "text", "where"),
    [
        pytest.param(
            SAME,
            "PostgresWorld('postgresql://fxworld:***@127.0.0.1:5432/fxworld')",
            None,
            id="masked-url-password-equals-user-and-db",
        ),
        pytest.param(
            SAME,
            "database 'fxworld' does not exist (user fxworld)",
            None,
            id="user-and-db-named-in-a-message",
        ),
        pytest.param(
            SAME,
            "connecting to postgresql://fxworld:fxworld@127.0.0.1/fxworld",
            "in a URL's userinfo",
            id="userinfo-when-password-equals-user",
        ),
        pytest.param(
            SAME,
            "PostgresWorld(user='fxworld', password='fxworld')",
            "in a password field",
            id="password-field-when-password-equals-user",
        ),
        pytest.param(
            OWN,
            "PostgresWorld(host='db.example', password=s3cr3t-pw)",
            "in a password field",
            id="password-field",
        ),
        pytest.param(
            OWN, "authentication failed: s3cr3t-pw rejected", "as raw text", id="raw-text"
        ),
        pytest.param(
            OWN, "postgresql://app:s3cr3t-pw@db.example/app", "in a URL's userinfo", id="userinfo"
        ),
        pytest.param(
            OWN, "PostgresWorld('postgresql://app:***@db.example:5432/app')", None, id="masked"
        ),
        pytest.param(
            OWN, "s3cr3t-pwx is another word", None, id="a-longer-word-is-not-the-password"
        ),
        pytest.param(
            "s3://bucket/p?secret_key=abcd1234&region=eu",
            "signature for abcd1234 failed",
            "as raw text",
            id="query-secret-raw",
        ),
        pytest.param(
            "s3://bucket/p?secret_key=abcd1234",
            "S3World('s3://bucket/p?secret_key=***')",
            None,
            id="query-secret-masked",
        ),
        pytest.param("sqlite:///x.db", "anything at all", None, id="no-password"),
    ],
)
def test_leak(url: str, text: str, where: str | None) -> None:
    assert leak(text, url) == where


def test_password_of() -> None:
    assert password_of(SAME) == "fxworld"
    assert password_of("postgresql://u:p%40ss@h/db") == "p@ss"
    assert password_of("s3://b/p?token=abcdef") == "abcdef"
    assert password_of("s3://b/p?token=abc") is None  # too short to look for
    assert password_of("memory://") is None
    assert password_of(None) is None
