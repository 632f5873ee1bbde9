"""docs/schema.md's table reference is what scripts/schema_doc.py writes from models/schema/:
a schema change without ``make schema-doc`` fails here; the hand-written parts stay as written."""

from pathlib import Path

import pytest

from models import schema
from scripts import schema_doc

ROOT = Path(__file__).resolve().parents[2]


def test_docs_schema_md_is_what_the_generator_writes():
    current = (ROOT / "docs" / "schema.md").read_text(encoding="utf-8")
    assert schema_doc.BEGIN in current
    assert schema_doc.END in current
    assert schema_doc.render(current) == current, (
        "docs/schema.md is stale: run `make schema-doc` (python -m scripts.schema_doc)")


def test_every_table_and_column_of_the_schema_is_in_the_reference():
    part = schema_doc.generated()
    for table in schema.ALL_TABLES:
        section = part.split(f"### `{table.name}`\n", 1)[1].split("\n### ", 1)[0]
        for column, kind in table.columns:
            assert f"| `{column}` | {kind} |" in section, (table.name, column)
    for view in schema.ALL_VIEWS:
        assert f"### `{view.name}` (view)" in part


def test_a_new_table_appears_with_its_doc_key_and_column_comments(
        monkeypatch: pytest.MonkeyPatch):
    source = '''
EXTRA_TABLE = Table(
    "extra_table",
    (
        # when the row was seen
        ("seen_at", "TIMESTAMP"),
        ("amount", "DECIMAL(18,6)"),  # money | rounded once
    ),
    key=("seen_at",),
    doc="One row per test.",
)
'''
    extra = schema.Table("extra_table", (("seen_at", "TIMESTAMP"), ("amount", "DECIMAL(18,6)")),
                         key=("seen_at",), doc="One row per test.")
    monkeypatch.setattr(schema, "EXTRA_TABLE", extra, raising=False)
    monkeypatch.setattr(schema, "ALL_TABLES", (*schema.ALL_TABLES, extra))
    part = schema_doc.generated(schema_doc.schema_source() + source)
    section = part.split("### `extra_table`\n", 1)[1].split(schema_doc.END, 1)[0]
    assert "One row per test." in section
    assert "Key: `seen_at`." in section
    assert "| `seen_at` | TIMESTAMP | when the row was seen |" in section
    assert "| `amount` | DECIMAL(18,6) | money \\| rounded once |" in section
    # the committed file does not have it: the check fails until regenerated
    current = (ROOT / "docs" / "schema.md").read_text(encoding="utf-8")
    assert schema_doc.render(current) != current


def test_hand_written_text_around_the_markers_is_kept():
    doc = f"# Title\n\nhand text\n\n{schema_doc.BEGIN}\nold\n{schema_doc.END}\n\n## Later\nmore\n"
    out = schema_doc.render(doc)
    assert out.startswith("# Title\n\nhand text\n\n" + schema_doc.BEGIN)
    assert out.endswith(schema_doc.END + "\n\n## Later\nmore\n")
    assert "\nold\n" not in out
    assert schema_doc.render(out) == out
    with pytest.raises(ValueError, match="expected the line"):
        schema_doc.render(f"text\n{schema_doc.BEGIN}\nno end\n")


def test_the_check_option_fails_on_a_stale_file(tmp_path: Path):
    stale = tmp_path / "schema.md"
    stale.write_text(f"# T\n\n{schema_doc.BEGIN}\nold\n{schema_doc.END}\n", encoding="utf-8")
    assert schema_doc.main(["--check", "--doc", str(stale)]) == 1
    assert schema_doc.main(["--doc", str(stale)]) == 0
    assert schema_doc.main(["--check", "--doc", str(stale)]) == 0
