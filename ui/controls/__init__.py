"""Streamlit-bound pieces every page shares: session keys, sidebar and run panel, stepper, presenter mode, demo panel."""
