"""Who gets an alert: the person's address, else the team's, admins in copy (docs/alerts.md).

Addresses come from the contacts file named in ``[gpuledger.alerts] contacts`` (``kind,name,
email``; kind person|team; names as the identity data spells them). An unreadable line is an
error naming the file, line and field: an alert must not silently miss its owner.
"""

from dataclasses import dataclass, field
from pathlib import Path

from connectors.errors import SourceError
from connectors.reference_files import read_contacts
from gpuledger.alerts.message import Recipients

UNATTRIBUTED = ("", "unattributed")


@dataclass(frozen=True)
class Contacts:
    people: dict[str, str] = field(default_factory=dict)
    teams: dict[str, str] = field(default_factory=dict)


def load_contacts(path: Path | None) -> Contacts:
    if path is None:
        return Contacts()
    frame, rejects = read_contacts(path)
    if rejects:
        msg = "; ".join(r.describe() for r in rejects[:5]) + (
            f" (and {len(rejects) - 5} more)" if len(rejects) > 5 else "")
        raise SourceError(msg)
    people = {r["name"]: r["email"] for r in frame.iter_rows(named=True) if r["kind"] == "person"}
    teams = {r["name"]: r["email"] for r in frame.iter_rows(named=True) if r["kind"] == "team"}
    return Contacts(people, teams)


def recipients(person: str | None, team: str | None, contacts: Contacts,
               admins: tuple[str, ...]) -> tuple[Recipients, str]:
    """The recipients and where they came from: ``person``, ``team`` or ``admins`` (no address
    for the owner: the admins get it in ``to``, and the log says so)."""
    if person not in UNATTRIBUTED and person in contacts.people:
        to, source = contacts.people[person], "person"  # type: ignore[index]
    elif team not in UNATTRIBUTED and team in contacts.teams:
        to, source = contacts.teams[team], "team"  # type: ignore[index]
    else:
        return Recipients(to=tuple(admins), cc=()), "admins"
    return Recipients(to=(to,), cc=tuple(a for a in admins if a != to)), source
