"""Writing a report folder so that readers see the old one or the new one, never half of one."""

import csv
import ctypes
import errno
import hashlib
import os
import re
import shutil
import tempfile
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from models.cells import safe_cell

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def slugs(names: Iterable[str]) -> dict[str, str]:
    """A file-name-safe slug per name; names that would share a slug get a hash suffix each."""
    plain: dict[str, str] = {}
    for name in names:
        ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
        plain[name] = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:60] or "blank"
    taken: dict[str, int] = {}
    for slug in plain.values():
        taken[slug] = taken.get(slug, 0) + 1
    result = {name: slug for name, slug in plain.items() if taken[slug] == 1}
    used = set(result.values())
    for name, slug in plain.items():
        if name in result:
            continue
        # a hashed slug may equal another name's plain slug ("cc-1-<hash>"): lengthen the hash
        digest = hashlib.sha256(name.encode()).hexdigest()
        size = 8
        while f"{slug}-{digest[:size]}" in used and size < len(digest):
            size += 1
        result[name] = f"{slug}-{digest[:size]}"
        used.add(result[name])
    return result


def csv_value(value: Any) -> str:
    """Ledger values as text, exactly: decimals keep their scale, NULL is empty."""
    if value is None:
        return ""
    if isinstance(value, bool):  # as DuckDB and the dashboard's CSVs write them
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(columns)
        # text a spreadsheet would evaluate gets an apostrophe (models.cells)
        writer.writerows([safe_cell(csv_value(row.get(c))) if isinstance(row.get(c), str)
                          else csv_value(row.get(c)) for c in columns] for row in rows)
        _sync(fh)


def write_text(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
        _sync(fh)


def _sync(fh: Any) -> None:
    fh.flush()
    os.fsync(fh.fileno())


def replace_folder(target: Path, fill: Callable[[Path], None]) -> None:
    """Let ``fill`` write a fresh folder beside ``target``, then swap it in as ``target``.

    The swap is one ``renameat2(RENAME_EXCHANGE)`` on Linux (the folder never disappears); where
    that is missing, two renames (the folder is briefly absent, never half-written). A failure in
    ``fill`` leaves ``target`` as it was.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        fill(fresh)
        umask = os.umask(0)
        os.umask(umask)
        fresh.chmod(0o777 & ~umask)  # mkdtemp makes it private; reports are for readers
        _sync_folder(fresh)
        _swap_in(fresh, target)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)  # after a swap this holds the old folder


def _sync_folder(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap_in(fresh: Path, target: Path) -> None:
    for _attempt in range(5):
        try:
            fresh.rename(target)  # no target yet (or an empty one): done
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        if _exchange(fresh, target):
            return
        if not target.exists():
            continue  # another writer moved it away in between: try the plain rename again
        old = target.with_name(f".{target.name}.old.{os.getpid()}.{os.urandom(4).hex()}")
        target.rename(old)
        try:
            fresh.rename(target)
        finally:
            shutil.rmtree(old, ignore_errors=True)
        return
    msg = f"expected to swap {fresh} in as {target}, found it changing under concurrent writers"
    raise OSError(msg)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths; False when the platform or file system cannot."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EXDEV, errno.ENOENT):
        return False
    raise OSError(code, os.strerror(code), str(b))
