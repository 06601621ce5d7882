"""The ground floor (layer 0): errors, engines, targets, connections, the bundle and its schema, servers, processes."""
