"""The PII check of every finished log line (`pii.ScrubbingFormatter`): a line already free of the bound
PII is written as the Powertools formatter wrote it, without decoding and encoding it again; any other
line is erased and masked as before."""

from __future__ import annotations

import json
import logging
from functools import partial
from typing import Any

import pytest
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from lambdajobs.runtime import pii

PAYLOAD = {"email": "ada@example.com", "card": {"number": "4111111111111111"}, "name": "Zoë Smith"}
FIELDS = ("email", "card.number", "name")


def record(message: str, **extra: Any) -> logging.LogRecord:
    made = logging.LogRecord("lambdajobs", logging.INFO, __file__, 1, message, (), None)
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def full_path(inner: logging.Formatter, made: logging.LogRecord) -> str:
    """What the formatter wrote for every line before it had a fast path."""
    data = json.loads(inner.format(made))
    data = pii._erase_fields(data, FIELDS)
    return pii.scrub(json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str))


def formatter(**options: Any) -> tuple[LambdaPowertoolsFormatter, pii.ScrubbingFormatter]:
    inner = LambdaPowertoolsFormatter(**options)
    inner.append_keys(correlation_id="job-1")
    return inner, pii.ScrubbingFormatter(inner)


def test_a_clean_line_is_written_as_the_formatter_wrote_it(monkeypatch):
    inner, outer = formatter()
    with pii.bound(FIELDS, PAYLOAD):
        # the filter has masked the extra named like a field: nothing left to do
        made = record("job succeeded", email=pii.MASK, provider_id="p-1")
        expected = full_path(inner, made)
        monkeypatch.setattr(pii.json, "loads", pytest.fail)  # never decoded again
        assert outer.format(made) == inner.format(made) == expected


@pytest.mark.parametrize(
    ("options", "message", "extra"),
    [
        ({}, "sent to ada@example.com", {}),  # a value in the message
        ({}, "charged", {"note": {"card": "4111111111111111"}}),  # a value in a nested extra
        ({}, "charged", {"email": "someone@else.org"}),  # a key named like a field (not from the filter)
        ({}, "charged", {"wallet": {"number": "5500005555555559"}}),  # ... at any depth
        ({}, "for Zoë Smith", {}),  # a value JSON writes escaped
        ({"json_serializer": partial(json.dumps, ensure_ascii=True)}, "for Zoë Smith", {}),
        ({"json_serializer": json.dumps}, "charged", {"email": "someone@else.org"}),  # ": " between
    ],
)
def test_a_line_with_pii_is_erased_and_masked_as_before(options, message, extra):
    inner, outer = formatter(**options)
    with pii.bound(FIELDS, PAYLOAD):
        made = record(message, **extra)
        line = outer.format(made)
        assert line == full_path(inner, made)
        for secret in ("ada@example.com", "4111111111111111", "someone@else.org", "5500005555555559", "Zoë"):
            assert secret not in line
        assert "\\u00eb" not in line  # (nor its escaped form)


def test_values_of_a_record_longest_first_fields_as_a_list_too():
    payload = {"a": {"b": "abcd"}, "c": ["abcdef", "abcd", 123456], "d": "xyz"}
    found = pii.values_of(("a.b", "c", "d"), payload)
    assert set(found[:2]) == {"abcdef", "123456"} and found[2:] == ("abcd",)  # (equal lengths: any order)
    assert pii.values_of(["a.b"], payload) == ("abcd",)  # a caller's list of fields
    assert pii.values_of(("d", "nope.x"), payload) == ()  # shorter than MIN_VALUE_LENGTH, or missing
    with pii.bound(["c"], payload):  # (the CLI and the board pass lists)
        assert pii.scrub("abcdef and 123456") == "***** and *****"
