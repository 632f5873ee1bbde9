from datetime import date, timedelta

import dagster as dg

from pipelines.site import site_if_any

# Without a site file the Definitions refuse to load (pipelines/definitions.py names both ways
# to give one); this start only lets the modules be imported before a site is chosen.
UNCONFIGURED_FIRST_DAY = date(2000, 1, 3)

_site = site_if_any()
FIRST_DAY = _site.first_day if _site is not None else UNCONFIGURED_FIRST_DAY

# Daily UTC partitions shared by both scheduling domains and the model, from the site's
# first_day.
daily_partitions = dg.DailyPartitionsDefinition(start_date=FIRST_DAY.isoformat(), end_offset=1)

# ISO weeks (Monday to Monday, UTC) for the chargeback close and weekly reports: the week that
# holds first_day is the first. The week under way is a partition too (end_offset), so its
# close can be run by hand or ahead of its Monday; the schedule closes only ended weeks.
weekly_partitions = dg.WeeklyPartitionsDefinition(
    start_date=(FIRST_DAY - timedelta(days=FIRST_DAY.weekday())).isoformat(),
    day_offset=1,
    end_offset=1,
)
