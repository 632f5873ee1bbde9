"""The site file Dagster is built from (``docs/site-file.md``): ``GPULEDGER_CONFIG``, else
``./gpuledger.toml``. Plain functions, no Dagster definitions (this module is outside defs/)."""

from pathlib import Path

from gpuledger.site import Site, SiteError, load_site, site_file, with_environment

NO_SITE = ("expected a site file: set GPULEDGER_CONFIG=/path/to/gpuledger.toml or put a "
           "gpuledger.toml in the working folder ({cwd}), found neither")


def site_path() -> Path:
    """The site file in use, or a ``SiteError`` naming both ways to give one."""
    path = site_file()
    if path is None:
        raise SiteError(NO_SITE.format(cwd=Path.cwd()))
    return path.absolute()  # its relative paths then hold in every step's process


def read_site(path: Path | str) -> Site:
    """The validated site, with ``GPULEDGER_DB``/``GPULEDGER_REPORTS`` over the file."""
    return with_environment(load_site(path))


def current_site() -> Site:
    return read_site(site_path())


def site_if_any() -> Site | None:
    """The site when a site file is given; ``None`` when none is (a malformed one raises)."""
    return current_site() if site_file() is not None else None
