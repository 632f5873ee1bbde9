"""Shapes of sacct fields the ledger does not read, to place stray separators in wide dumps.

A plain ``-P`` dump with a ``|`` inside a free-text field has more fields on that line than the
header. ``connectors.slurm.parse`` tries every placement of the extra separators among the
free-text fields and keeps the one under which every field it reads parses. In a
``--format=ALL`` dump (sacct 22.05: 109 fields, 9 of them free text) that is not always enough:
``SubmitLine`` and ``SystemComment`` have only ``Suspended`` between them, a field the ledger
never reads, so a ``|`` in a submit line (``sbatch --wrap "a | b"``, ``-J 'x|y'``) fits both.

When several placements pass the ordinary checks, the ones under which these fields also have
the shape sacct prints them in are kept; exactly one left → the line loads, else it is rejected
as ambiguous. The shapes come from sacct's print routines (``src/sacct/print.c``: integers,
``[D-]HH:MM:SS`` durations) and allow what real dumps show in them (empty on step rows,
``Unknown``, ``INVALID``, ``Partition_Limit``); they never reject a line by themselves.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

_INT = r"^(?:\d*|Unknown|INVALID)$"
_DURATION = (r"^(?:|(?:\d+-)?(?:\d{1,2}:)?\d{1,2}:\d{2}(?:\.\d+)?|Unknown|INVALID|UNLIMITED"
             r"|Partition_Limit)$")

_AMOUNT = r"^(?:\d+(?:\.\d+)?[KMGTPE]?|Unknown)?$"  # 0, 4648K, 2.60M, 20.54M (unit-converted)

#: Field (as sacct names it, upper case) → the pattern its value has.
SHAPES: dict[str, str] = {
    **dict.fromkeys(
        ("SUSPENDED", "CPUTIME", "RESERVED", "PLANNED", "RESVCPU", "PLANNEDCPU", "TOTALCPU",
         "USERCPU", "SYSTEMCPU"), _DURATION),
    **dict.fromkeys(
        ("ASSOCID", "CPUTIMERAW", "DBINDEX", "GID", "PRIORITY", "QOSRAW", "REQCPUS",
         "RESVCPURAW", "PLANNEDCPURAW", "WCKEYID", "CONSUMEDENERGYRAW", "RESERVATIONID",
         "NTASKS", "MAXDISKREADTASK", "MAXDISKWRITETASK", "MAXPAGESTASK", "MAXRSSTASK",
         "MAXVMSIZETASK", "MINCPUTASK"), _INT),
    **dict.fromkeys(
        ("CONSUMEDENERGY", "AVECPUFREQ", "AVEDISKREAD", "AVEDISKWRITE", "AVEPAGES", "AVERSS",
         "AVEVMSIZE", "MAXDISKREAD", "MAXDISKWRITE", "MAXPAGES", "MAXRSS", "MAXVMSIZE"), _AMOUNT),
}


def shape_ok(frame: pl.DataFrame, names: Sequence[str]) -> list[bool]:
    """For each row of ``frame`` (columns ``f0`` … in header order, ``names`` as printed),
    whether every field with a known shape has it."""
    tests = [pl.col(f"f{i}").fill_null("").str.contains(SHAPES[n.strip().upper()])
             for i, n in enumerate(names) if n.strip().upper() in SHAPES]
    if not tests:
        return [True] * frame.height
    return frame.select(pl.all_horizontal(tests)).to_series().to_list()
