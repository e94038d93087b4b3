package fakeapi

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type shardsPageBody struct {
	Events []struct {
		ID      string `json:"id"`
		Pos     int64  `json:"pos"`
		Payload string `json:"payload"`
	} `json:"events"`
	CompleteThrough int64   `json:"complete_through"`
	Next            *string `json:"next"`
	HasMore         bool    `json:"has_more"`
	Sealed          bool    `json:"sealed"`
}

func shardsGet(t *testing.T, s *Shards, name, after string, limit int) (shardsPageBody, answer) {
	t.Helper()
	a := get(t, fmt.Sprintf("%s/partitions/%s?after=%s&limit=%d", s.URL(), name, after, limit))
	var p shardsPageBody
	if a.status == http.StatusOK {
		a.json(t, &p)
	}
	return p, a
}

type shardsListBody struct {
	Partitions []ShardInfo `json:"partitions"`
	Head       int64       `json:"head"`
}

func shardsList(t *testing.T, s *Shards) shardsListBody {
	t.Helper()
	a := get(t, s.URL()+"/partitions")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var l shardsListBody
	a.json(t, &l)
	return l
}

// readShard follows next from after to the partition's end (a page
// without has_more) and returns the ids read and the last page.
func readShard(t *testing.T, s *Shards, name, after string, limit int) ([]string, shardsPageBody) {
	t.Helper()
	var ids []string
	for range 1000 {
		p, a := shardsGet(t, s, name, after, limit)
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		for _, e := range p.Events {
			ids = append(ids, e.ID)
		}
		if !p.HasMore {
			return ids, p
		}
		require.NotNil(t, p.Next)
		after = *p.Next
	}
	t.Fatal("no end after 1000 pages")
	return nil, shardsPageBody{}
}

func idsOf(evs []ShardEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// TestShardsPositionsAreOneGlobalSequence: every event takes the next
// integer whichever partition it goes to; Events lists them in position
// order.
func TestShardsPositionsAreOneGlobalSequence(t *testing.T) {
	s := NewShards(t, "a", "b")
	evs := s.AppendOpen(3)
	require.Len(t, evs, 6)
	for i, e := range evs {
		require.Equal(t, int64(i+1), e.Pos)
		require.Equal(t, []string{"a", "b"}[i%2], e.Partition, "round robin over the open partitions")
	}
	more, err := s.Append("b", 2)
	require.NoError(t, err)
	require.Equal(t, []int64{7, 8}, []int64{more[0].Pos, more[1].Pos})
	require.Equal(t, int64(8), s.Head())
	require.Equal(t, append(idsOf(evs), idsOf(more)...), idsOf(s.Events()))
	_, err = s.Append("nope", 1)
	require.ErrorIs(t, err, ErrNoShard)
}

// TestShardsPagesFollowNextToTheHead: pages of K events in position order;
// a page with more behind it is complete through its last event; the page
// reaching the end is complete through the head (a position another
// partition took) and its next is its last event, so the events appended
// later come on it; an empty head page's next is its own after.
func TestShardsPagesFollowNextToTheHead(t *testing.T) {
	s := NewShards(t, "a", "b")
	s.AppendOpen(7) // a: 1,3,...,13; b: 2,...,14
	first, a := shardsGet(t, s, "a", "0", 3)
	require.Equal(t, http.StatusOK, a.status)
	require.True(t, first.HasMore)
	require.Equal(t, []int64{1, 3, 5}, []int64{first.Events[0].Pos, first.Events[1].Pos, first.Events[2].Pos})
	require.Equal(t, int64(5), first.CompleteThrough, "complete through the page's last event while more follow")
	require.Equal(t, "5", *first.Next)

	ids, last := readShard(t, s, "a", "0", 3)
	want := []string{}
	for _, e := range s.Events() {
		if e.Partition == "a" {
			want = append(want, e.ID)
		}
	}
	require.Equal(t, want, ids, "every event of a, once, in order")
	require.False(t, last.Sealed)
	require.Equal(t, int64(14), last.CompleteThrough, "the end page is complete through the head")
	require.Equal(t, "13", *last.Next, "next is the last event's position")

	head, _ := shardsGet(t, s, "a", "13", 3)
	require.Empty(t, head.Events)
	require.False(t, head.HasMore)
	require.Equal(t, "13", *head.Next, "an empty head page's next is its own after")
	require.Equal(t, int64(14), head.CompleteThrough)

	s.AppendOpen(1) // a: 15, b: 16
	after, _ := shardsGet(t, s, "a", "13", 3)
	require.Len(t, after.Events, 1)
	require.Equal(t, int64(15), after.Events[0].Pos)
	require.Equal(t, int64(16), after.CompleteThrough)

	served := s.Served(ShardsPage)
	start, _ := shardsGet(t, s, "b", "", 100)
	require.Len(t, start.Events, 8, "no after: from the start")
	require.Equal(t, served+1, s.Served(ShardsPage))
	require.Zero(t, s.Served(ShardsList))
}

// TestShardsSplitSealsTheParent: a split seals the parent at its current
// end (its last page says sealed, without next), lists two children naming
// it as parent, and new events go to the children only, above every event
// of the parent.
func TestShardsSplitSealsTheParent(t *testing.T) {
	s := NewShards(t, "a", "b")
	s.AppendOpen(4)
	headAtSplit := s.Head()
	children, err := s.Split("a")
	require.NoError(t, err)
	require.Equal(t, [2]string{"a.1", "a.2"}, children)
	_, err = s.Append("a", 1)
	require.ErrorIs(t, err, ErrShardSealed)
	_, err = s.Split("a")
	require.ErrorIs(t, err, ErrShardSealed)

	later := s.AppendOpen(2)
	for _, e := range later {
		require.NotEqual(t, "a", e.Partition, "no event goes to the sealed parent")
		require.Greater(t, e.Pos, headAtSplit)
	}

	l := shardsList(t, s)
	require.Equal(t, []ShardInfo{
		{Name: "a", Sealed: true}, {Name: "b"},
		{Name: "a.1", Parents: []string{"a"}}, {Name: "a.2", Parents: []string{"a"}},
	}, l.Partitions, "the sealed parent stays listed")
	require.Equal(t, s.Head(), l.Head)
	require.Equal(t, 1, s.Served(ShardsList))

	ids, last := readShard(t, s, "a", "0", 3)
	require.Len(t, ids, 4, "the parent ends with its events before the split")
	require.True(t, last.Sealed)
	require.Nil(t, last.Next, "the sealed last page has no successor")
	require.Equal(t, headAtSplit, last.CompleteThrough)
	// A page of the parent read after its end is still sealed.
	end, _ := shardsGet(t, s, "a", fmt.Sprint(headAtSplit), 3)
	require.True(t, end.Sealed)
	require.Empty(t, end.Events)

	for _, c := range children {
		cids, cp := readShard(t, s, c, "0", 10)
		require.Len(t, cids, 2)
		require.False(t, cp.Sealed)
	}
}

// TestShardsAddPartition: an added partition is listed and open, starts
// without events, and its events are above every earlier event.
func TestShardsAddPartition(t *testing.T) {
	s := NewShards(t, "a")
	s.AppendOpen(3)
	require.NoError(t, s.AddPartition("z"))
	require.ErrorIs(t, s.AddPartition("z"), ErrShardExists)
	require.Error(t, s.AddPartition("x/y"), "a name that cannot be a path segment")
	empty, a := shardsGet(t, s, "z", "0", 5)
	require.Equal(t, http.StatusOK, a.status)
	require.Empty(t, empty.Events)
	require.Equal(t, int64(3), empty.CompleteThrough)
	evs, err := s.Append("z", 2)
	require.NoError(t, err)
	require.Equal(t, int64(4), evs[0].Pos)
	require.Equal(t, []ShardInfo{{Name: "a"}, {Name: "z"}}, shardsList(t, s).Partitions)
}

func TestShardsBadRequests(t *testing.T) {
	s := NewShards(t, "a")
	for _, tc := range []struct {
		name, path string
		status     int
	}{
		{"unknown partition", "/partitions/nope?after=0", http.StatusNotFound},
		{"negative after", "/partitions/a?after=-1", http.StatusBadRequest},
		{"after not a number", "/partitions/a?after=x", http.StatusBadRequest},
		{"limit zero", "/partitions/a?limit=0", http.StatusBadRequest},
		{"limit too large", "/partitions/a?limit=1001", http.StatusBadRequest},
		{"no such path", "/other", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := get(t, s.URL()+tc.path)
			require.Equal(t, tc.status, a.status, "%s", a.body)
		})
	}
}

// TestShardsTrickleAppendsWholeRounds: Trickle appends to every open
// partition on its timer, a whole round at a time; stop may be called
// twice.
func TestShardsTrickleAppendsWholeRounds(t *testing.T) {
	s := NewShards(t, "a", "b")
	stop := s.Trickle(t, 5*time.Millisecond, 1)
	require.Eventually(t, func() bool { return s.Head() >= 6 }, time.Minute, 5*time.Millisecond)
	stop()
	n := s.Head()
	require.Zero(t, n%2, "each round appends to both partitions")
	stop()
	require.Equal(t, n, s.Head())
	count := map[string]int{}
	for _, e := range s.Events() {
		count[e.Partition]++
	}
	require.Equal(t, count["a"], count["b"])
}

// TestShardsConcurrentUse: appends, splits and page reads from several
// goroutines leave every position taken exactly once.
func TestShardsConcurrentUse(t *testing.T) {
	s := NewShards(t, "a", "b", "c")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				s.AppendOpen(1)
			}
		})
	}
	wg.Go(func() { _, _ = s.Split("b") })
	wg.Go(func() {
		for range 10 {
			resp, err := http.Get(s.URL() + "/partitions/a?after=0&limit=7")
			if assert.NoError(t, err) {
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				resp.Body.Close()
			}
		}
	})
	wg.Wait()
	evs := s.Events()
	require.Len(t, evs, int(s.Head()))
	for i, e := range evs {
		require.Equal(t, int64(i+1), e.Pos)
	}
}

func TestShardsRateLimitAnswer(t *testing.T) {
	s := NewShards(t, "a")
	rateLimitCase(t, s.Control, s.URL()+"/partitions/a", "rate limited", true)
}
