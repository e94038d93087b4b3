package httpprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/sdkcoord"
	"github.com/tidemark/tidemark/provider"
)

func TestParsePositionOfEachDeclaredKind(t *testing.T) {
	seq := "49590338271490256608559692538361571095921575989136588898"
	decSeq, err := coord.DecimalPosition(seq)
	require.NoError(t, err)
	ts := time.Date(2026, 12, 3, 6, 0, 0, 5e8, time.UTC)
	for _, tc := range []struct {
		name  string
		kind  coord.Kind
		in    any
		want  coord.Position
		error string
	}{
		{"integer from a number", coord.KindInteger, json.Number("42"), coord.IntPosition(42), ""},
		{"integer from a string", coord.KindInteger, " -7 ", coord.IntPosition(-7), ""},
		{"integer overflow", coord.KindInteger, seq, coord.Position{}, "not an int64"},
		{"decimal from a string", coord.KindDecimal, seq, decSeq, ""},
		{"decimal with leading zeros", coord.KindDecimal, "00" + seq, decSeq, ""},
		{"decimal from a JSON number", coord.KindDecimal, json.Number(seq), decSeq, ""},
		{"decimal from bytes (XML text)", coord.KindDecimal, []byte("17"), coord.Position{Kind: coord.KindDecimal, Str: "17"}, ""},
		{"decimal negative", coord.KindDecimal, "-1", coord.Position{}, "not an unsigned decimal integer"},
		{"decimal fraction", coord.KindDecimal, 1.5, coord.Position{}, "not an exact unsigned integer"},
		{"timestamp", coord.KindTimestamp, "2026-12-03T06:00:00.5Z", coord.TimestampPosition(ts), ""},
		{"string key", coord.KindString, "photos/2026/0001.jpg", coord.StringPosition("photos/2026/0001.jpg"), ""},
		{"string from a number is refused", coord.KindString, json.Number("12"), coord.Position{}, "not a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePosition(tc.kind, tc.in)
			if tc.error != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.error)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A stream API's records carry 56-digit sequence numbers as strings: they
// are decimal positions (ordered numerically, dense arithmetic not needed),
// the watermark is the last one in the same coordinate, and both the fast
// path (`root = this.SequenceNumber`) and a general mapping read them.
func TestFetchDecimalSequenceNumbers(t *testing.T) {
	seqs := []string{"49590338271490256608559692538361571095921575989136588898", "49590338271490256608559692538361571095921575989136588899", "49590338271490256608559692538361571095921575989136589000"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		recs := make([]map[string]any, len(seqs))
		for i, s := range seqs {
			recs[i] = map[string]any{"SequenceNumber": s, "Data": fmt.Sprintf("r%d", i)}
		}
		require.NoError(t, json.NewEncoder(w).Encode(map[string]any{"Records": recs, "NextShardIterator": "it-2"}))
	}))
	defer srv.Close()
	for name, mapping := range map[string]string{"fast path": "root = this.SequenceNumber", "general mapping": `root = this.SequenceNumber.trim()`} {
		t.Run(name, func(t *testing.T) {
			p := parseProvider(t, fmt.Sprintf(`
http:
  url: '%s/records?it=${! @cursor }'
  events: root = this.Records
  event_id: root = this.SequenceNumber
  event_position: '%s'
  successor: root = this.NextShardIterator
  complete_through: root = this.Records.index(-1).SequenceNumber
  contract:
    positions: ordered
    coordinate: decimal
    # The page's own last position certifies nothing: recorded, never final.
    finality: none
`, srv.URL, mapping), nil, nil)
			resp := fetch(t, p, "shardId-000000000000", "it-1")
			require.Len(t, resp.Events, 3)
			for i, s := range seqs {
				assert.Equal(t, provider.KindDecimal, resp.Events[i].Position.Kind)
				assert.Equal(t, s, resp.Events[i].Position.String())
			}
			assert.True(t, sdkcoord.Position(resp.Events[1].Position).Less(sdkcoord.Position(resp.Events[2].Position)), "...8899 < ...9000")
			assert.Equal(t, provider.Watermark{Kind: provider.KindDecimal, Str: seqs[2]}, resp.CompleteThrough)
		})
	}
}

// A position that does not parse as the declared kind makes the page
// malformed, naming the event.
func TestFetchPositionOfAnotherKindIsMalformed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"items":[{"id":"a","seq":"12"},{"id":"b","seq":"twelve"}]}`)
	}))
	defer srv.Close()
	p := parseProvider(t, fmt.Sprintf(`
http:
  url: '%s/items'
  events: root = this.items
  event_position: root = this.seq
  successor: root = deleted()
  contract:
    position_type: decimal
`, srv.URL), nil, nil)
	_, err := p.Fetch(t.Context(), provider.Request{Partition: "p"})
	require.ErrorIs(t, err, provider.ErrMalformed)
	assert.Contains(t, err.Error(), "event 1")
	assert.Contains(t, err.Error(), `"twelve" is not an unsigned decimal integer`)
}
