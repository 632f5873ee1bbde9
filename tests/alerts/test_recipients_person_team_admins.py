"""Recipients: the person's address, else the team's, admins in copy; nobody known: the
admins, logged as such. The contacts file's bad lines are errors naming file, line, field."""

from pathlib import Path

import pytest

from connectors.errors import SourceError
from gpuledger.alerts.recipients import Contacts, load_contacts, recipients

ADMINS = ("ops@example.org", "lead@example.org")


def test_person_then_team_then_admins() -> None:
    c = Contacts({"alice": "alice@example.org"}, {"ml": "ml@example.org"})
    r, source = recipients("alice", "ml", c, ADMINS)
    assert (r.to, r.cc, source) == (("alice@example.org",), ADMINS, "person")
    r, source = recipients("erin", "ml", c, ADMINS)
    assert (r.to, source) == (("ml@example.org",), "team")
    r, source = recipients("unattributed", "unattributed", c, ADMINS)
    assert (r.to, r.cc, source) == (ADMINS, (), "admins")


def test_contacts_file(tmp_path: Path) -> None:
    path = tmp_path / "contacts.csv"
    path.write_text("kind,name,email\nperson,alice,alice@example.org\nteam,ml,ml@example.org\n")
    c = load_contacts(path)
    assert c.people == {"alice": "alice@example.org"}
    assert c.teams == {"ml": "ml@example.org"}


@pytest.mark.parametrize(("line", "field", "reason"), [
    ("group,ml,ml@example.org", "kind", "expected one of person, team, found 'group'"),
    ("person,bob,bob-at-example", "email", "expected an e-mail address"),
    ("person,alice,other@example.org", "name", "found a second (first on line 2)"),
    ("person,,x@example.org", "name", "expected a value, found an empty field"),
])
def test_bad_lines_name_file_line_and_field(tmp_path: Path, line: str, field: str,
                                            reason: str) -> None:
    path = tmp_path / "contacts.csv"
    path.write_text(f"kind,name,email\nperson,alice,alice@example.org\n{line}\n")
    with pytest.raises(SourceError) as caught:
        load_contacts(path)
    assert f"{path.resolve()}:3: field {field}: " in str(caught.value)
    assert reason in str(caught.value)
