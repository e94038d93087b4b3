package fakeapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// relNext returns the URL of a Link header's rel="next", or "".
func relNext(h http.Header) string {
	for _, part := range strings.Split(h.Get("Link"), ",") {
		u, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if ok && strings.Contains(params, `rel="next"`) {
			return strings.Trim(strings.TrimSpace(u), "<>")
		}
	}
	return ""
}

// walk follows rel="next" from url and returns the ids of every page.
func walk(t *testing.T, url string) [][]int64 {
	t.Helper()
	var pages [][]int64
	for url != "" {
		a := get(t, url)
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		var rows []OffsetRow
		a.json(t, &rows)
		var ids []int64
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		pages = append(pages, ids)
		url = relNext(a.header)
	}
	return pages
}

func TestOffsetPagesByPageNumberOffsetAndKeyset(t *testing.T) {
	o := NewOffset(t, 10)
	require.Equal(t, []int64{10, 20, 30, 40, 50, 60, 70}, o.Append(7))
	want := [][]int64{{10, 20, 30}, {40, 50, 60}, {70}}
	for _, tc := range []struct{ kind, first string }{
		{OffsetByPage, "/items?page=1&per_page=3"},
		{OffsetByOffset, "/items?offset=0&limit=3"},
		{OffsetByKeyset, "/items?after_id=0&limit=3"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			assert.Equal(t, want, walk(t, o.URL()+tc.first))
			assert.Equal(t, 3, o.Served(tc.kind))
		})
	}
	a := get(t, o.URL()+"/items?page=9&per_page=3")
	assert.Equal(t, "[]", string(a.body), "a page past the end is empty")
	assert.Empty(t, relNext(a.header))
	assert.Equal(t, "7", a.header.Get("X-Total-Count"))
	assert.Equal(t, http.StatusBadRequest, get(t, o.URL()+"/items?offset=-1").status)
}

// A delete on a page already read slides a row onto it: the next page by
// number or offset no longer shows it, the next page by keyset does. An
// insert on a page already read slides that page's last row onto the next
// page again.
func TestOffsetDeleteAndInsertOnAnEarlierPageShiftOffsetsNotKeysets(t *testing.T) {
	o := NewOffset(t, 10)
	o.Append(7)
	page := func(q string) string { a := get(t, o.URL()+"/items?"+q); return string(a.body) }
	ids := func(q string) []int64 {
		var rows []OffsetRow
		get(t, o.URL()+"/items?"+q).json(t, &rows)
		out := []int64{}
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}
	require.Contains(t, page("page=1&per_page=3"), `"id":30`)
	require.True(t, o.Delete(20))
	assert.Equal(t, []int64{50, 60, 70}, ids("page=2&per_page=3"), "40 slid onto page 1")
	assert.Equal(t, []int64{50, 60, 70}, ids("offset=3&limit=3"))
	assert.Equal(t, []int64{40, 50, 60}, ids("after_id=30&limit=3"), "keyset: nothing moves")
	require.True(t, o.Insert(15))
	require.True(t, o.Insert(25))
	assert.False(t, o.Insert(25), "an id is inserted once")
	assert.Equal(t, []int64{30, 40, 50}, ids("page=2&per_page=3"), "30 slid onto page 2 again")
	assert.Equal(t, []int64{10, 15, 25, 30, 40, 50, 60, 70}, o.IDs())
	assert.False(t, o.Delete(20), "a row is deleted once")
	for i, want := range []string{"row 10", "row 15"} {
		assert.Contains(t, page(fmt.Sprintf("offset=%d&limit=1", i)), want)
	}
}
