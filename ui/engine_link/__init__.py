"""The dashboard's link to the engine: the one worker per server, each session's runs, server measurements in a child process."""
