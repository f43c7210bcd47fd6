"""The glossary's button: a popover with every term (ui/text/glossary.py), in the sidebar and in presenter mode's bar, so
every page reaches it.
"""
from __future__ import annotations

import streamlit as st

from ui.text import glossary

LABEL = "Glossary"


def popover(where=st, kind: str = "secondary") -> None:
    """The Glossary button in `where` (a container, or st for the current one); the terms open in a popover.
    `kind`: the button's type ("tertiary": no frame, where space is short)."""
    with where.popover(LABEL, icon=":material/menu_book:", type=kind,
                       help="TTFT, TPOT, ITL, KV cache, GEMM/GEMV, MFU, roofline…"):
        st.markdown(glossary.markdown())
