// Package cluster is how pdc servers find each other and how clients find
// them: the launcher's rank and size, the server list file in the tmpdir
// (versioned, checksummed, written atomically, complete only once every
// server has registered), the rank-0 rendezvous record, the cluster secret
// file, and the liveness checks that tell a running cluster from the stale
// files of a dead one.
package cluster
