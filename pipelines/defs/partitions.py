import os

import dagster as dg

# Daily UTC partitions shared by both scheduling domains and the model.
daily_partitions = dg.DailyPartitionsDefinition(
    start_date=os.environ.get("GPULEDGER_PARTITIONS_START", "2026-01-01"),
    end_offset=1,
)

# ISO weeks (Monday to Monday, UTC) for the chargeback close and weekly reports.
weekly_partitions = dg.WeeklyPartitionsDefinition(
    start_date=os.environ.get("GPULEDGER_WEEKS_START", "2025-12-29"),
    day_offset=1,
)
