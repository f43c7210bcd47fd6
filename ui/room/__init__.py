"""Room mode: one server for a workshop. config (codes, from the environment the launcher sets), registry (who is
in the room, the teacher's locks, follow-me, the poll), throttle (wrong codes slowed per client) and qr (the room's
address as a QR code) are Streamlit-free; gate draws the join-code form, code_display the code and QR for the teacher."""
