"""`lifecycle.now_iso` writes what `datetime.now(UTC).isoformat(timespec="milliseconds")` writes."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from lambdajobs.runtime import lifecycle


def test_now_iso_is_datetimes_text(monkeypatch):
    moments = [1_795_953_600.1, 1_795_953_600.0, 1_795_953_600.9999996, 1_795_953_600.9995, 1_795_953_599.25]
    rng = random.Random(31)
    moments += [rng.uniform(1.7e9, 1.9e9) for _ in range(20_000)]
    moments += [
        rng.randint(1_700_000_000, 1_900_000_000) + rng.randint(0, 999_999) / 1e6 for _ in range(20_000)
    ]
    for moment in moments:
        monkeypatch.setattr(lifecycle.time, "time", lambda moment=moment: moment)
        expected = (
            datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )
        assert lifecycle.now_iso() == expected, moment
