"""Shared GPUs in the weekly report: per sharing mode and MIG profile, the slice-hours held, the
physical GPU-hours charged for them (docs/shared-gpus.md), their busy share and the share of the
week's charged GPU-hours, from the ledger's ``shared_gpu_daily``."""

from collections.abc import Sequence
from decimal import Decimal

from gpuledger.report import pages
from gpuledger.report.lines import Row


def shared_section(rows: Sequence[Row]) -> str:
    shared = [r for r in rows if r["sharing"] != "whole"]  # one row per mode, profile, currency
    if not shared:
        return ""  # nothing shared this week: no section
    total = sum(Decimal(r["physical_gpu_seconds"] or 0) for r in rows)
    body = []
    for r in shared:
        physical = Decimal(r["physical_gpu_seconds"] or 0)
        slices = Decimal(r["slice_seconds"] or 0)
        busy = Decimal(r["busy_slice_seconds"] or 0)
        amount = r["amount"] if not r["unpriced"] else None
        per_busy = (pages.money({r["currency"]: amount / (busy / 3600)})
                    if amount is not None and busy else "–")
        body.append(
            f'<tr><td>{pages.esc(r["sharing"])}</td><td>{pages.esc(r["slice_profile"] or "")}'
            f'</td><td class="num">{r["allocations"]}</td>'
            f'<td class="num">{pages.hours(slices / 3600)}</td>'
            f'<td class="num">{pages.hours(physical / 3600)}</td>'
            f'<td class="num">{(busy / slices if slices else Decimal(0)):.3f}</td>'
            f'<td class="num">{(physical / total if total else Decimal(0)):.3f}</td>'
            f'<td class="num">{per_busy}</td></tr>')
    share = sum(Decimal(r["physical_gpu_seconds"] or 0) for r in shared) / total if total else 0
    return (
        f'<h2>Shared GPUs</h2><p class="note" id="shared-gpus">{100 * share:.1f} % of the '
        "week's charged GPU-hours ran on shared GPUs. MIG instances are charged their compute "
        "slices over the GPU's; time-shared GPUs are split among the holders present "
        "(docs/shared-gpus.md). Invoice lines show both: <code>gpu_hours</code> (physical "
        "share) and <code>slice_hours</code>.</p>"
        '<table id="shared-gpu-modes"><thead><tr><th>sharing</th><th>MIG profile</th>'
        "<th>allocations</th><th>slice-hours</th><th>GPU-hours (physical share)</th>"
        "<th>busy share of slices</th><th>share of GPU-hours</th>"
        f"<th>cost per busy slice-hour</th></tr></thead><tbody>{''.join(body)}</tbody></table>"
    )
