"""One step's orchestration: the client pool and loop, the pipe protocol, merging, the result row."""
