"""Streamlit-free words, numbers and tables the pages show: diagnosis, lab texts, the ledger's rows, prompts."""
