"""Small helpers shared by tests (imported as ``tests.helpers``)."""

import shutil
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TINY_WORLD = FIXTURES / "tiny_world"


def copy_tiny_world(dest: Path) -> Path:
    """A writable copy of the tiny world, so tests may break its files."""
    target = dest / "world"
    shutil.copytree(TINY_WORLD, target)
    return target
