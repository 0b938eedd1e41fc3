package main

import (
	"fmt"
	"log/slog"
)

// reservedFiles are the open files spent keeps for everything but its
// clients' connections: the store's tables and WAL (pebble keeps up to a
// thousand open), the shared stores' connection pools, the data
// directory's files, the audit log.
const reservedFiles = 1024

// fitOpenFiles keeps the connections the listeners may serve at once
// within the process's limit of open files (RLIMIT_NOFILE, which Go raises
// to its hard limit at start): with max_clients on each of two listeners
// past it, a flood of connections would leave the store unable to open a
// table, and the fence and the flushes would fail. When the listeners'
// max_clients together pass the limit less reservedFiles, each is lowered
// in proportion, with a warning that says how to raise the limit; with
// fewer than 64 files left for connections, the server refuses to start.
func fitOpenFiles(cfg *serveConfig, limit uint64, log *slog.Logger) error {
	if limit == 0 {
		return nil // unknown: nothing to fit
	}
	httpMax := cfg.Limits.WithDefaults().MaxClients
	respMax := 0
	if cfg.RESP.Listen != "" {
		respMax = httpMax
		if cfg.RESP.MaxClients > 0 {
			respMax = cfg.RESP.MaxClients
		}
	}
	want := uint64(httpMax + respMax)
	if limit <= reservedFiles+64 {
		return fmt.Errorf("the limit of open files is %d: spent needs %d for its store and at least 64 for connections; raise it (ulimit -n, or LimitNOFILE= in a systemd unit)", limit, reservedFiles)
	}
	room := limit - reservedFiles
	if want <= room {
		return nil
	}
	newHTTP := max(int(room*uint64(httpMax)/want), 1)
	log.Warn("max_clients lowered to fit the limit of open files: raise the limit (ulimit -n, or LimitNOFILE= in a systemd unit) or lower max_clients",
		"open_file_limit", limit, "reserved", reservedFiles, "max_clients", httpMax, "resp_max_clients", respMax, "now_max_clients", newHTTP)
	lim := cfg.Limits.WithDefaults()
	lim.MaxClients = newHTTP
	lim.MaxUnauthenticated = min(lim.MaxUnauthenticated, newHTTP)
	cfg.Limits = lim
	if respMax > 0 {
		cfg.RESP.MaxClients = max(int(room*uint64(respMax)/want), 1)
		log.Warn("resp: max_clients lowered to fit the limit of open files", "now_max_clients", cfg.RESP.MaxClients)
	}
	return nil
}
