"""`pii.mask_payload`: a payload as it may be shown, its declared fields erased and their values
masked wherever else they appear (no AWS)."""

from __future__ import annotations

from lambdajobs.runtime.pii import MASK, mask_payload, scrub


def test_declared_fields_are_erased_and_their_values_masked_elsewhere():
    payload = {
        "to": "ada@example.com",
        "customer": {"name": "Ada Lovelace", "tier": "gold"},
        "note": "reply to ada@example.com",
        "cc": ["ada@example.com", "bob@example.com"],
        "ada@example.com": 1,
    }
    shown = mask_payload(payload, ("to", "customer.name"))
    assert shown == {
        "to": MASK,
        "customer": {"name": MASK, "tier": "gold"},
        "note": f"reply to {MASK}",
        "cc": [MASK, "bob@example.com"],
        MASK: 1,
    }
    # AND the payload itself is left as it was
    assert payload["to"] == "ada@example.com"


def test_a_number_field_is_masked_where_it_appears_whole():
    shown = mask_payload({"card": 4111111111111111, "copy": 4111111111111111, "n": 3}, ["card"])
    assert shown == {"card": MASK, "copy": MASK, "n": 3}


def test_without_fields_the_payload_is_shown_as_it_is():
    payload = {"to": "ada@example.com"}
    assert mask_payload(payload, ()) == payload


def test_masking_leaves_no_values_bound_after():
    mask_payload({"to": "ada@example.com"}, ("to",))
    assert scrub("ada@example.com") == "ada@example.com"


def test_a_payload_that_is_not_a_dict_is_scrubbed_of_the_values_bound_only():
    assert mask_payload('{"to":"ada@exa', ("to",)) == '{"to":"ada@exa'
