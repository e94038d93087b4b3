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
	etcd := Binary(t, "etcd")
	dataDir := filepath.Join(t.TempDir(), "etcd")
	return Start(t, Config{
		Name:  "etcd",
		Ports: 2, // client, peer
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
				"--logger", "zap",
				"--log-level", "error",
			}
		},
		Ready: HTTPProbe(http.MethodGet, "/health", "", http.StatusOK),
	})
}
