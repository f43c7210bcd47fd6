"""Streamlit-bound pieces every page shares: the launcher, sidebar and run panel, stepper, presenter mode, demo panel."""
