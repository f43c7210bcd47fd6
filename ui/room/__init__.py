"""Room mode: one server for a workshop, in one package.

Streamlit-free (the import contract in pyproject.toml keeps them so): config (room mode on or off, the codes from the
launcher), registry (the Room: members, locks, follow-me, poll rounds), signing (the teacher code's hash, members'
signed sign-in tokens), throttle (wrong codes slowed per client), slots (one run in flight per session, who may run
labs), admission (those rules for one session, as the engine link asks them), polls and poll_experiments (predict,
then measure), qr (the room's address as a QR code), store (the room's SQLite file), keeper (what the room hands to
its file, and reading it back), saver (browsers' kept runs and runs in flight into the file), opening (the room opened
by the launcher before Streamlit), export (the session's files after class).
Streamlit parts: current (the one Room per server, this session's role), gate (the join form, sign-in, deep links),
follow (presence, locks, follow-me, interrupted runs), sessions (every session's work, for the console), console
(the teacher console), code_display (the join code and QR code), poll_panel (the poll on the page)."""
