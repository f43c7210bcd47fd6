"""The room's rules and roster, Streamlit-free: codes (config), members, locks and follow-me (registry), the back-off
for wrong codes (throttle). Below both ui/engine_link and ui/room, so neither imports the other to reach them."""
