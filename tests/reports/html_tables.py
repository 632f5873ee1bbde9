"""Read a report page back: its tables (by id) and key-figure cards, with their data attributes."""

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Cell:
    attrs: dict[str, str]
    text: str = ""


@dataclass
class Row:
    attrs: dict[str, str]
    cells: list[Cell] = field(default_factory=list)

    def by_col(self) -> dict[str, Cell]:
        return {c.attrs["data-col"]: c for c in self.cells if "data-col" in c.attrs}


@dataclass
class Page:
    tables: dict[str, list[Row]] = field(default_factory=dict)
    cards: dict[str, Cell] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # element id -> text (p with an id)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._table: str | None = None
        self._row: Row | None = None
        self._cell: Cell | None = None
        self._card: tuple[str, Cell] | None = None
        self._card_value = False
        self._note: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table":
            self._table = a.get("id", "")
            self.page.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self._row = Row(a)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = Cell(a)
        elif tag == "div" and "data-card" in a:
            self._card = (a["data-card"], Cell(a))
        elif tag == "div" and self._card is not None and a.get("class") == "value":
            self._card_value = True
        elif tag == "p" and "id" in a:
            self._note = a["id"]
            self.page.notes[self._note] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag == "tr" and self._row is not None:
            if self._row.cells and self._table is not None:
                self.page.tables[self._table].append(self._row)
            self._row = None
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            if tag == "td":
                self._row.cells.append(self._cell)
            self._cell = None
        elif tag == "div" and self._card_value:
            self._card_value = False
        elif tag == "div" and self._card is not None:
            self.page.cards[self._card[0]] = self._card[1]
            self._card = None
        elif tag == "p":
            self._note = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.text += data
        if self._card_value and self._card is not None:
            self._card[1].text += data
        if self._note is not None:
            self.page.notes[self._note] += data


def read_page(html: str) -> Page:
    reader = _Reader()
    reader.feed(html)
    reader.close()
    return reader.page
