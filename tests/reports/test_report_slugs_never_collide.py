"""File names of the weekly report's cost centres: a hashed slug never lands on another cost
centre's plain slug."""

import hashlib
import re

from gpuledger.report.files import slugs


def test_a_hashed_slug_never_lands_on_another_cost_centres_plain_slug():
    digest = hashlib.sha256(b"CC/1").hexdigest()[:8]
    names = ["CC/1", "CC-1", f"cc-1-{digest}"]
    got = slugs(names)
    assert len(set(got.values())) == len(names), got
    assert all(re.fullmatch(r"[a-z0-9-]+", s) for s in got.values())
