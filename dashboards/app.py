"""gpuledger dashboards: the router. Run with `streamlit run dashboards/app.py`."""

import sys
from pathlib import Path

import streamlit as st

# `streamlit run` puts only this folder on sys.path; the project root holds the packages.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

st.set_page_config(page_title="gpuledger", layout="wide")

PAGES = Path(__file__).resolve().parent / "pages"
navigation = st.navigation(
    {
        "Overview": [
            st.Page(PAGES / "overview.py", title="Cluster overview", default=True),
        ],
    }
)
navigation.run()
