"""Slurm's accounts and users, from ``sacctmgr -n -P show assoc format=…`` (explicit fields).

Each line is one association, ``|``-separated in the order of ``ASSOC_FIELDS``. An account
row has an empty ``User`` and names its parent (``ParentName``; empty for ``root``); a user
row has a ``User`` and an empty ``ParentName`` (its account is the parent). A header line
(output without ``-n``) is recognised and used for the field order. Lines with the wrong
number of fields or no account are rejects, never dropped.

Shape: tests/fixtures/real_slurm/sacctmgr-associations.txt (the suite's real Slurm 22.05,
format Cluster,Account,ParentName,User,DefaultQOS,QOS) and the live command in the
@pytest.mark.slurm test.
"""

import polars as pl

from connectors.errors import Reject

REJECT_SOURCE = "sacctmgr_assoc"
ASSOC_FIELDS = ("Cluster", "Account", "User", "Partition", "ParentName")
SACCTMGR_ASSOC_COMMAND = ("sacctmgr", "-n", "-P", "show", "assoc",
                          f"format={','.join(ASSOC_FIELDS)}")

ACCOUNT_SCHEMA = {"cluster": pl.String, "account": pl.String, "parent": pl.String}
USER_SCHEMA = {"cluster": pl.String, "account": pl.String, "user": pl.String,
               "partition": pl.String}


def parse_sacctmgr_assoc(
    text: str, *, fields: tuple[str, ...] = ASSOC_FIELDS,
    source_file: str = "sacctmgr show assoc",
) -> tuple[pl.DataFrame, pl.DataFrame, list[Reject]]:
    """(accounts, users, rejects): one row per account (``ACCOUNT_SCHEMA``), one per user
    association (``USER_SCHEMA``)."""
    wanted = {"Account", "User", "ParentName"}
    accounts: dict[tuple[str, str], str] = {}
    users: set[tuple[str, str, str, str]] = set()
    rejects: list[Reject] = []
    order = list(fields)
    for line_no, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        values = raw.split("|")
        if [v.strip().lower() for v in values] == [f.lower() for f in order] or (
                line_no == 1 and wanted <= {v.strip() for v in values}):
            order = [v.strip() for v in values]  # a header: it says the order
            continue
        if len(values) != len(order):
            rejects.append(Reject(REJECT_SOURCE, source_file, line_no, "*",
                                  f"expected {len(order)} fields ({'|'.join(order)}), "
                                  f"found {len(values)}", raw))
            continue
        row = dict(zip(order, (v.strip() for v in values), strict=True))
        missing = sorted(wanted - set(row))
        if missing:
            rejects.append(Reject(REJECT_SOURCE, source_file, line_no, missing[0],
                                  f"expected a {missing[0]} field, found fields {order}", raw))
            continue
        account = row["Account"]
        if not account:
            rejects.append(Reject(REJECT_SOURCE, source_file, line_no, "Account",
                                  "expected an account, found an empty field", raw))
            continue
        cluster = row.get("Cluster", "")
        if row["User"]:
            users.add((cluster, account, row["User"], row.get("Partition", "")))
        else:
            accounts[(cluster, account)] = row["ParentName"]
    acc = pl.DataFrame([(c, a, p) for (c, a), p in sorted(accounts.items())],
                       schema=ACCOUNT_SCHEMA, orient="row")
    usr = pl.DataFrame(sorted(users), schema=USER_SCHEMA, orient="row")
    return acc, usr, rejects
