from pathlib import Path

import dagster as dg

from pipelines.site import current_site


@dg.definitions
def defs() -> dg.Definitions:
    # a missing or malformed site file stops here, with the file, the key and the fix
    current_site()
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
