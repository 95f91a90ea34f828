"""World URLs (W16): what ``fxworld.urls.mask`` hides, and a URL that does not parse
being one ``ConfigurationError`` that never quotes the driver's words."""

from __future__ import annotations

import pytest

from fxworld import open_world
from fxworld.errors import ConfigurationError
from fxworld.urls import mask, mask_urls, with_query

# (url, what must not show, what must still show)
MASKED = {
    "slash-in-password": ("postgresql://fx:Pg/Secret1@db/app", ["Secret1", "Pg"], "@db/app"),
    "at-in-password": ("postgresql://fx:Pa@ss9w@db/app", ["ss9w", "Pa@"], "fx:***@db/app"),
    "query-mark-in-password": ("redis://app:a?b9x@cache/0", ["b9x"], "app:***@cache/0"),
    "hash-in-password": ("redis://app:a#b9x@cache/0", ["b9x"], "app:***@cache/0"),
    "redis-empty-user": ("redis://:Hunter22@cache:6379/0", ["Hunter22"], ":***@cache:6379"),
    "token-as-user": ("https://Tok3nUser@example.com/x", ["Tok3nUser"], "***@example.com"),
    "token-as-user-in-query": (
        "s3://b/p?endpoint_url=https://Tok3nUser@example.com/x",
        ["Tok3nUser"],
        "***@example.com",
    ),
    "secret-query": ("redis://h/0?password=Qu3ry&db=1", ["Qu3ry"], "db=1"),
    "aws-signature": ("s3://b/p?X-Amz-Signature=Sig99&namespace=n", ["Sig99"], "namespace=n"),
    "auth-query": ("postgresql://h/db?sslpassword=Ssl1&authtoken=At1", ["Ssl1", "At1"], "h/db"),
    "token-in-endpoint-url": (
        "s3://b/p?endpoint_url=http://h:9000/?token=Tok3nXyz&namespace=n",
        ["Tok3nXyz"],
        "endpoint_url=http://h:9000/?token=***",
    ),
    "encoded-token-in-endpoint-url": (
        "s3://b/p?endpoint_url=http://h:9000/%3Ftoken%3DTok3nXyz",
        ["Tok3nXyz"],
        "http://h:9000/",
    ),
    "userinfo-in-endpoint-url": (
        "s3://b/p?endpoint_url=http://u:EpPass1@h:9000&namespace=n",
        ["EpPass1"],
        "s3://b/p?endpoint_url=http://u:***@h:9000&namespace=n",
    ),
    "misspelt-scheme": ("reddis://app:Ty9pw0@host/0", ["Ty9pw0"], "reddis://app:***@host/0"),
    "one-slash": ("postgresql:/u:OddPw1@host", ["OddPw1"], "postgresql:/u:***@host"),
}


@pytest.mark.parametrize(("url", "hidden", "kept"), MASKED.values(), ids=MASKED.keys())
def test_mask_hides_everything_between_the_scheme_and_the_last_at(
    url: str, hidden: list[str], kept: str
) -> None:
    shown = mask(url)
    for secret in hidden:
        assert secret not in shown, shown
    assert kept in shown
    assert mask(shown) == shown  # masking twice changes nothing more


def test_mask_keeps_a_url_without_credentials_as_written() -> None:
    for url in (
        "sqlite:////abs/world.db",
        "sqlite:///.fxworld/world.db?namespace=n&mode=ro",
        "s3://bucket/prefix/?endpoint_url=http://127.0.0.1:9000&region=eu-west-1",
        "memory://",
    ):
        assert mask(url) == url


def test_mask_urls_masks_every_url_in_a_message() -> None:
    text = (
        'Could not connect to the endpoint URL: "http://h:1/b?list-type=2&token=Tk1" '
        "nor to redis://:RdPw1@h/0."
    )
    shown = mask_urls(text)
    assert "Tk1" not in shown and "RdPw1" not in shown
    assert "endpoint URL" in shown and "redis://:***@h/0" in shown


def test_with_query_sets_one_parameter() -> None:
    assert with_query("sqlite:////a/w.db", "mode", "ro") == "sqlite:////a/w.db?mode=ro"
    url = with_query("sqlite:///w.db?namespace=n&mode=rwc", "mode", "ro")
    assert url == "sqlite:///w.db?namespace=n&mode=ro"


UNPARSEABLE = {
    "redis-slash-in-password": ("redis://app:Xy7/Kq9@127.0.0.1:1/0", ["Xy7", "Kq9"]),
    "redis-port-not-a-number": ("redis://app:RdPw2@127.0.0.1:Prt9/0", ["RdPw2"]),
    "postgres-port-not-a-number": ("postgresql://u:PgPw2@h:Prt9/db", ["PgPw2"]),
    "postgres-bad-ipv6": ("postgresql://u:PgPw3@[::1/db", ["PgPw3"]),
    "sqlite-bad-ipv6": ("sqlite://[::1/x.db", []),
}


@pytest.mark.parametrize(("url", "hidden"), UNPARSEABLE.values(), ids=UNPARSEABLE.keys())
def test_a_url_that_does_not_parse_is_one_configuration_error(url: str, hidden: list[str]) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_world(url)
    text = str(info.value)
    assert "\n" not in text and "does not parse" in text, text
    for secret in hidden:
        assert secret not in text


def test_a_redis_world_built_directly_from_a_bad_url_is_a_configuration_error() -> None:
    from fxworld_redis import RedisWorld

    with pytest.raises(ConfigurationError) as info:
        RedisWorld("redis://app:Xy7/Kq9@127.0.0.1:1/0")
    assert "Xy7" not in str(info.value) and "Kq9" not in str(info.value)
