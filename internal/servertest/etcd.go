package servertest

import (
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
)

// StartEtcd starts Debian's etcd (Binary: skipped, or failed under
// TIDEMARK_REQUIRE_SERVERS, when it is not installed) as a one-member
// cluster named name, its client and peer ports on 127.0.0.1 and its data
// in a temporary directory; stopped when t ends. The client URL is the
// server's URL.
func StartEtcd(t *testing.T, name string) *Server {
	t.Helper()
	return StartEtcdAt(t, name, nil)
}

// StartEtcdAt is StartEtcd on the given client and peer ports (nil: free
// ones), with a fresh data directory. Started with the name and ports of an
// earlier one (stopped first), it is that cluster recreated: the same
// initial cluster and initial-cluster-token ("tidemark-test"), hence the same
// cluster id and member id, with a new history (revisions from 1).
func StartEtcdAt(t *testing.T, name string, ports []int) *Server {
	t.Helper()
	etcd := Binary(t, "etcd")
	dataDir := filepath.Join(t.TempDir(), "etcd")
	return Start(t, Config{
		Name:  "etcd",
		Ports: 2, // client, peer
		At:    ports,
		Command: func(ports []int) []string {
			client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
			peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
			return []string{etcd,
				"--name", name,
				"--data-dir", dataDir,
				"--listen-client-urls", client,
				"--advertise-client-urls", client,
				"--listen-peer-urls", peer,
				"--initial-advertise-peer-urls", peer,
				"--initial-cluster", name + "=" + peer,
				"--initial-cluster-token", "tidemark-test",
				"--logger", "zap",
				"--log-level", "error",
			}
		},
		Ready: HTTPProbe(http.MethodGet, "/health", "", http.StatusOK),
	})
}
