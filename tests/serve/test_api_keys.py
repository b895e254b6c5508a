"""mtkit.serve.api_keys: the --api-keys file, the per-key limit over a moving minute, and keys kept out of the log."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mtkit.errors import UserError
from mtkit.serve.api_keys import HideKeys, KeyLimiter, read_api_keys
from mtkit.serve.request import RequestError


def test_keys_file_with_and_without_limits(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("# operators\nalpha 60\n\nbeta\r\n  gamma   2  \n", encoding="utf-8")
    assert read_api_keys(path) == {"alpha": 60, "beta": None, "gamma": 2}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("alpha 60 extra\n", r"keys:1: expected KEY or KEY REQUESTS_PER_MINUTE, got 3 fields"),
        ("alpha\nalpha 5\n", r"keys:2: this key is listed twice"),
        ("alpha 0\n", r"keys:1: the limit must be a whole number"),
        ("alpha -3\n", r"keys:1: the limit must be a whole number"),
        ("# nothing\n\n", r"keys: no API key in the file"),
    ],
)
def test_bad_keys_files_name_the_line_and_never_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "keys"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=message) as refused:
        read_api_keys(path)
    assert "alpha" not in str(refused.value)


def test_a_missing_keys_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file"):
        read_api_keys(tmp_path / "absent")


def test_missing_or_unknown_keys_are_403_and_a_limit_holds_over_a_moving_minute() -> None:
    limiter = KeyLimiter({"open": None, "two": 2})
    for key in (None, "", 42, "wrong"):
        with pytest.raises(RequestError) as refused:
            limiter.admit(key, now=0.0)
        assert refused.value.status == 403
        assert "wrong" not in str(refused.value)
    for second in range(100):
        limiter.admit("open", now=float(second))  # no limit
    limiter.admit("two", now=0.0)
    limiter.admit("two", now=30.0)
    with pytest.raises(RequestError) as refused:
        limiter.admit("two", now=59.9)
    assert refused.value.status == 429 and "2 per 1 minute" in str(refused.value)
    limiter.admit("two", now=60.0)  # the request at 0 s has left the window
    with pytest.raises(RequestError):
        limiter.admit("two", now=61.0)  # a refused request is not counted, the one at 30 s still is
    limiter.admit("two", now=90.0)


def test_access_log_hides_keys_in_query_strings() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "POST", "/translate?q=Hi&api_key=s3cret&target=de", "1.1", 200),
        None,
    )
    assert HideKeys().filter(record)
    assert record.getMessage() == '127.0.0.1:5 - "POST /translate?q=Hi&api_key=<hidden>&target=de HTTP/1.1" 200'
