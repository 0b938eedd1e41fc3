// Command member is etcd itself (etcdmain from go.etcd.io/etcd/server/v3, the
// version pinned in go.mod), built by package etcdtest to run one cluster
// member per process. It takes etcd's flags.
//
// When the environment variable SPENT_ETCDTEST_WATCH_STDIN is 1, the member
// also exits as soon as its standard input ends, so that the members a test
// started die with the test process even when it is killed.
package main

import (
	"io"
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	if os.Getenv("SPENT_ETCDTEST_WATCH_STDIN") == "1" {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			os.Exit(2)
		}()
	}
	etcdmain.Main(os.Args)
}
