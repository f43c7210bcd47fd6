"""Room mode: one server for a workshop. config (codes, from the environment the launcher sets), registry (who is
in the room, the teacher's locks, follow-me, the poll) are Streamlit-free; gate draws the join-code form."""
