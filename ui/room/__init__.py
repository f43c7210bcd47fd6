"""Room mode: one server for a workshop, in one package.

Streamlit-free (the import contract in pyproject.toml keeps them so): config (room mode on or off, the codes from the
launcher), registry (the Room: members, locks, follow-me, the poll), throttle (wrong codes slowed per client), slots
(one run in flight per session, who may run labs), admission (those rules for one session, as the engine link asks
them), polls and poll_experiments (predict, then measure), qr (the room's address as a QR code).
Streamlit parts: current (the one Room per server, this session's role), gate (the join form), follow (presence,
locks, follow-me), sessions (every session's work, for the console), console (the teacher console), code_display
(the join code and QR code), poll_panel (the poll on the page)."""
