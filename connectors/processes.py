"""Whether a process still runs: scratch files and copies named after their writer's pid are
swept once that writer is gone (the OpenMetrics store's scratch folder, the lake's versions)."""

import os


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
