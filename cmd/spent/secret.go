package main

import (
	"io"
	"path/filepath"

	"github.com/spentledger/spent/node"
)

// storeDir holds the embedded pebble store in the data directory, unless
// --store names another place. The rest of the data directory's layout
// (lock, secret, fence) is package node's.
const storeDir = "pebble"

// openDataDir makes sure dir exists and returns the HMAC secret kept in it,
// generating one from rnd on first start (see node.OpenSecret), for the
// commands that use a data directory without a server: bench --embedded.
func openDataDir(dir string, rnd io.Reader) (secret []byte, created bool, err error) {
	cfg := node.DefaultConfig()
	cfg.Dir = dir
	cfg.EmbeddedDir = filepath.Join(dir, storeDir)
	cfg.Rand = rnd
	return node.OpenSecret(cfg)
}
