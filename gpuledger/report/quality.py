"""The data-quality gate in the weekly report: which invoice lines are provisional, and why.

The mark and its reasons come with each line from the ledger's invoice view (``provisional``,
``provisional_reasons``: "day cluster: reasons", " | "-joined; ``models/schema/``), so the
page, the CSVs and the dashboard show the same rule's outcome.
"""

from collections.abc import Sequence
from decimal import Decimal

from gpuledger.report import pages
from gpuledger.report.lines import Row


def provisional_lines(lines: Sequence[Row]) -> list[Row]:
    """Lines carrying the mark (a ledger from before the gate has none)."""
    return [line for line in lines if line.get("provisional")]


def provisional_reasons(lines: Sequence[Row]) -> list[str]:
    """Every "day cluster: reasons" behind the provisional lines, in day order, once."""
    found = {part for line in provisional_lines(lines)
             for part in str(line.get("provisional_reasons") or "").split(" | ") if part}
    return sorted(found)


def provisional_section(lines: Sequence[Row]) -> str:
    marked = provisional_lines(lines)
    if not marked:
        return ('<p class="note" id="provisional">Final: every invoice line below rests on days '
                "that passed the data-quality gate.</p>")
    seconds = sum(int(line.get("gpu_seconds") or 0) for line in marked)
    rows = "".join(
        f"<tr><td>{pages.esc(day)}</td><td>{pages.esc(why)}</td></tr>"
        for day, _, why in (reason.partition(": ") for reason in provisional_reasons(lines)))
    return (
        '<h2>Provisional</h2><p class="warn" id="provisional">'
        f"{len(marked)} invoice line(s) with {pages.hours(Decimal(seconds) / 3600)} GPU-hours are "
        "<strong>provisional</strong>: they hold days whose source data is incomplete, and may "
        "change when it is repaired (column <code>provisional</code> in the CSVs).</p>"
        '<table id="provisional-days"><thead><tr><th>day · cluster</th><th>reasons</th></tr>'
        f"</thead><tbody>{rows}</tbody></table>"
    )
