"""What "unattributed" means, defined once (docs/accounting.md, "Who pays").

resolve_identity.sql writes the literal ``unattributed`` into person, team or cost_centre when
no identity row gives that field. An invoice line or ledger row is:

- **unattributed** when its cost centre is ``unattributed``: nobody can be billed for it, and
  every invoice table shows it as the cost centre ``unattributed``. A row whose
  ``identity_source`` is ``unattributed`` (no source named any field) is always one of these;
- **incomplete** when its cost centre is known but its team or person is not: billed, though
  not to a person.

The Chargeback page and the weekly report both read these predicates, so their unattributed
figures are the same number.
"""

from collections.abc import Mapping

import polars as pl

UNATTRIBUTED = "unattributed"
# the field nobody can be billed without
BILLED_TO = "cost_centre"
# the fields an incomplete line lacks one of
OWNER_DETAIL = ("team", "person")


def is_unattributed(line: Mapping[str, object]) -> bool:
    """No cost centre resolved: nobody can be billed for the line."""
    return line.get(BILLED_TO) == UNATTRIBUTED


def is_incomplete(line: Mapping[str, object]) -> bool:
    """Billed to a cost centre, but its team or person is unresolved."""
    return not is_unattributed(line) and any(line.get(f) == UNATTRIBUTED for f in OWNER_DETAIL)


def unattributed() -> pl.Expr:
    """``is_unattributed`` as a Polars filter."""
    return pl.col(BILLED_TO) == UNATTRIBUTED


def incomplete() -> pl.Expr:
    """``is_incomplete`` as a Polars filter."""
    return ~unattributed() & pl.any_horizontal(pl.col(f) == UNATTRIBUTED for f in OWNER_DETAIL)
