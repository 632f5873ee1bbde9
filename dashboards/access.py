"""Who may see what: optional OIDC login, and a file that grants viewers cost centres.

Login uses Streamlit's own OIDC support (``st.login``) and is on when ``.streamlit/secrets.toml``
has an ``[auth]`` section; without it the app runs open.

Restriction mode is on when ``GPULEDGER_ACCESS_FILE`` names a TOML file::

    anonymous = []                          # what a viewer who is not logged in sees
    [viewers]
    "alice@example.org" = ["CC-PHY-100"]    # only this cost centre
    "finance@example.org" = ["*"]           # every cost centre

A viewer is the logged-in user's e-mail (compared case-insensitively); a viewer the file does not
name sees nothing. The query layer (``dashboards/data.py``) binds the granted list into every
query, so a page cannot show more than the grant even by mistake.
"""

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
from streamlit.errors import StreamlitSecretNotFoundError

from dashboards.text import plain

ACCESS_FILE_ENV = "GPULEDGER_ACCESS_FILE"
EVERYTHING = "*"


class AccessFileError(ValueError):
    """The access file is missing or malformed: the app refuses to show anything."""


@dataclass(frozen=True)
class Scope:
    """The cost centres one viewer may see; ``cost_centres`` None means all of them."""

    viewer: str | None
    cost_centres: tuple[str, ...] | None

    @property
    def restricted(self) -> bool:
        return self.cost_centres is not None


UNRESTRICTED = Scope(viewer=None, cost_centres=None)


@dataclass(frozen=True)
class Grants:
    """The parsed access file."""

    viewers: dict[str, tuple[str, ...]]
    anonymous: tuple[str, ...]

    def scope_for(self, viewer: str | None) -> Scope:
        granted = self.viewers.get(viewer.lower(), ()) if viewer else self.anonymous
        if EVERYTHING in granted:
            return Scope(viewer=viewer, cost_centres=None)
        return Scope(viewer=viewer, cost_centres=tuple(sorted(set(granted))))


def _cost_centre_list(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        msg = f"expected a list of cost centre strings for {where}, found {value!r}"
        raise AccessFileError(msg)
    return tuple(value)


def parse_grants(text: str, source: str = "access file") -> Grants:
    """Read the access file's TOML text."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = f"expected TOML in {source}, found a syntax error: {exc}"
        raise AccessFileError(msg) from exc
    unknown = sorted(set(doc) - {"viewers", "anonymous"})
    if unknown:
        msg = f"expected only the keys 'viewers' and 'anonymous' in {source}, found {unknown}"
        raise AccessFileError(msg)
    viewers = doc.get("viewers", {})
    if not isinstance(viewers, dict):
        msg = f"expected a [viewers] table in {source}, found {viewers!r}"
        raise AccessFileError(msg)
    return Grants(
        viewers={
            email.lower(): _cost_centre_list(ccs, f"viewer {email!r} in {source}")
            for email, ccs in viewers.items()
        },
        anonymous=_cost_centre_list(doc.get("anonymous", []), f"'anonymous' in {source}"),
    )


@st.cache_data(show_spinner=False)
def _grants(path: str, version: float) -> Grants:
    return parse_grants(Path(path).read_text(encoding="utf-8"), path)


def access_file() -> Path | None:
    value = os.environ.get(ACCESS_FILE_ENV, "").strip()
    return Path(value) if value else None


def load_grants() -> Grants | None:
    """The access file's grants, or None when restriction mode is off."""
    path = access_file()
    if path is None:
        return None
    if not path.is_file():
        msg = f"expected the access file {path} ({ACCESS_FILE_ENV}), found no such file"
        raise AccessFileError(msg)
    return _grants(str(path), path.stat().st_mtime)


def oidc_configured() -> bool:
    """Whether ``.streamlit/secrets.toml`` has an ``[auth]`` section (login is on)."""
    try:
        return "auth" in st.secrets
    except StreamlitSecretNotFoundError:
        return False


def logged_in_email() -> str | None:
    """The logged-in viewer's e-mail; None when nobody is logged in through OIDC."""
    if st.user.get("is_logged_in") is not True:
        return None
    # an address the identity provider says it has not verified is anyone's claim: it grants
    # nothing (OIDC's email_verified; absent where the provider does not send it)
    if str(st.user.get("email_verified", "")).lower() == "false":
        return None
    email = st.user.get("email")
    return str(email) if email else None


def current_scope() -> Scope:
    """What the viewer of this session may see (read on every query: it cannot go stale)."""
    grants = load_grants()
    if grants is None:
        return UNRESTRICTED
    return grants.scope_for(logged_in_email())


def login_gate() -> Scope:
    """Ask for a login when OIDC is configured; stop with a plain message on a bad access file.

    Returns the viewer's scope, shown in the sidebar.
    """
    if oidc_configured():
        if st.user.get("is_logged_in") is not True:
            st.title("gpuledger")
            st.write("Log in to see the GPU-hour ledger.")
            if st.button("Log in", type="primary"):
                try:
                    st.login()
                except st.errors.StreamlitAuthError as exc:
                    st.error(f"Login is configured in secrets.toml but cannot start: {exc}")
            st.stop()
        with st.sidebar:
            st.caption("Signed in as "
                       + plain(st.user.get("email") or st.user.get("name") or "unknown"))
            st.button("Log out", on_click=st.logout)
    try:
        scope = current_scope()
    except AccessFileError as exc:
        st.error(f"Access file problem, nothing is shown: {exc}")
        st.stop()
    if scope.restricted:
        with st.sidebar:
            if scope.cost_centres:
                st.caption("You see the cost centres " + ", ".join(scope.cost_centres) + ".")
            else:
                who = scope.viewer or "a viewer who is not logged in"
                st.warning(f"No cost centre is granted to {plain(who)}.")
    return scope
