"""fxworld.errors: one hierarchy, in two sections (what a world raises, what the
engine raises), every name importable from it."""

from __future__ import annotations

import fxworld.errors
import fxworld.models
import fxworld.models.base
from fxworld.errors import ModelError, WorldError


def test_every_error_fxworld_raises_is_a_world_error() -> None:
    for name in fxworld.errors.__all__:
        error = getattr(fxworld.errors, name)
        assert issubclass(error, WorldError), name


def test_a_model_error_is_one_class_wherever_it_is_imported_from() -> None:
    assert fxworld.models.ModelError is fxworld.models.base.ModelError is ModelError
    error = ModelError("the provider is down", retryable=True, status=503)
    assert (str(error), error.retryable, error.status) == ("the provider is down", True, 503)
    try:
        raise error
    except WorldError as caught:  # `except WorldError` catches all of fxworld's errors
        assert caught is error
