"""The sacct fields gpuledger extracts, and the exact extraction command.

Free-text fields (``JobName``, ``AdminComment``) come last, so a separator inside a job name can
only belong to them; the unit separator is used as delimiter because names cannot carry it in
practice.
"""

SACCT_FIELDS: tuple[str, ...] = (
    "JobID",
    "JobIDRaw",
    "User",
    "UID",
    "Account",
    "Partition",
    "QOS",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "Elapsed",
    "ElapsedRaw",
    "TimelimitRaw",
    "AllocCPUS",
    "AllocNodes",
    "NodeList",
    "AllocTRES",
    "ReqTRES",
    "Cluster",
    "Reservation",
    "Reason",
    "Flags",
    "WCKey",
    "JobName",
    "AdminComment",
)

FREE_TEXT_FIELDS: frozenset[str] = frozenset({"JobName", "AdminComment", "WCKey", "Comment"})

UNIT_SEPARATOR = "\x1f"


def sacct_command(start: str, end: str) -> list[str]:
    """The sacct argument list for a window (run with ``TZ=UTC SLURM_TIME_FORMAT=%s``)."""
    return [
        "sacct",
        "--allusers",
        "--duplicates",
        "--parsable2",
        "--noconvert",
        f"--delimiter={UNIT_SEPARATOR}",
        f"--starttime={start}",
        f"--endtime={end}",
        "--format=" + ",".join(SACCT_FIELDS),
    ]


SACCT_ENVIRONMENT = {"TZ": "UTC", "SLURM_TIME_FORMAT": "%s"}
