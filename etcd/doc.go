// Package etcd is the spent store that survives losing a machine: a
// [spent.Store] kept in an etcd cluster (go.etcd.io/etcd/client/v3), shared
// by any number of spent servers.
package etcd
