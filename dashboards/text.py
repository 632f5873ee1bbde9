"""Text from outside shown as text in Streamlit's Markdown (no queries, no Streamlit)."""

import re

_MARKUP = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character


def plain(text: object) -> str:
    """`text` from outside (a link's query, an identity) for Streamlit's Markdown as literal
    text: every ASCII punctuation character backslash-escaped (CommonMark renders each as
    itself), so ``[Your session expired](https://…)`` or ``![t](https://…/pixel.png)`` is never
    a link or an image and a bare URL is never made one (issue #28, the probe)."""
    return _MARKUP.sub(r"\\\1", str(text))
