package input

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/store"
)

// A change of the machine's state is logged once at debug level, naming
// the partition, both states and the call the new state awaits; no change,
// no line.
func TestPartitionLogsStateChanges(t *testing.T) {
	var buf bytes.Buffer
	log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	key := store.Key{Scope: "s", Partition: "p7"}
	p := &partition{key: key, log: log, m: chain.New(chain.Config{Key: key, MaxPagesInFlight: 1, PollInterval: time.Second, ParkCheckInterval: time.Second, StoreBackoff: time.Second})}

	p.noteState()
	require.Empty(t, buf.String(), "a new machine is in the state a new partition starts in")

	p.m.Step(chain.Start{})
	p.noteState()
	p.noteState()
	require.Equal(t, 1, bytes.Count(buf.Bytes(), []byte("state ")), buf.String())
	require.Contains(t, buf.String(), "level=DEBUG")
	require.Contains(t, buf.String(), "Partition p7: state new → loading (awaiting Load)")
}

// The gauge counts running partitions by state: a move takes one out of
// the old state and into the new one; New and Stopped count nowhere.
func TestStateCountsMovePartitions(t *testing.T) {
	var c stateCounts
	c.move(chain.StateNew, chain.StateLoading)
	c.move(chain.StateNew, chain.StateLoading)
	c.move(chain.StateLoading, chain.StateFetching)
	require.Equal(t, map[chain.State]int64{chain.StateLoading: 1, chain.StateFetching: 1}, c.n)
	c.move(chain.StateFetching, chain.StateStopped)
	c.move(chain.StateLoading, chain.StateParked)
	require.Equal(t, map[chain.State]int64{chain.StateLoading: 0, chain.StateFetching: 0, chain.StateParked: 1}, c.n)
}
