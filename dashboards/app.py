"""gpuledger dashboards: the router. Run with `streamlit run dashboards/app.py`."""

import sys
from pathlib import Path

import streamlit as st

# `streamlit run` puts only this folder on sys.path; the project root holds the packages.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dashboards.access import login_gate  # noqa: E402  (needs the path above)
from dashboards.data import one_connection_per_run  # noqa: E402

st.set_page_config(page_title="gpuledger", layout="wide")
login_gate()

# Not "pages/": with a folder of that name Streamlit runs a page's file directly on the first
# request to its URL (multipage v1), before this router and its login gate ever run.
VIEWS = Path(__file__).resolve().parent / "views"
navigation = st.navigation(
    {
        "Finance": [
            st.Page(VIEWS / "chargeback.py", title="Chargeback"),
        ],
        "Operations": [
            st.Page(VIEWS / "overview.py", title="Cluster overview", default=True),
            st.Page(VIEWS / "utilization.py", title="Utilization"),
            st.Page(VIEWS / "incidents.py", title="Incidents"),
            st.Page(VIEWS / "scorecard.py", title="Slurm vs Kubernetes"),
        ],
    }
)
# the page's queries share one snapshot connection, closed when the page's run ends
with one_connection_per_run():
    navigation.run()
