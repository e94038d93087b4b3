package fakeapi

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Offset request kinds counted by Served.
const (
	// OffsetByPage is a request by page number (`page`, `per_page`).
	OffsetByPage = "page"
	// OffsetByOffset is a request by offset (`offset`, `limit`).
	OffsetByOffset = "offset"
	// OffsetByKeyset is a request after an id (`after_id`, `limit`).
	OffsetByKeyset = "keyset"
)

// OffsetRow is one row of the Offset fake's collection.
type OffsetRow struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// Offset is a fake REST collection paged the way most public REST APIs
// page (create it with NewOffset): rows sorted by id, ascending, served as
// a bare JSON array, each page's successor in a `Link` header (RFC 8288),
// as GitHub's REST API (`page`, `per_page`, `Link: <...>; rel="next"`) and
// json-server do. Row ids are sparse (NewOffset's step), so that an insert
// can land on an earlier page, between two rows already read.
//
// It follows, for GET /<name> (any one name: the partition):
//
//   - `page=N&per_page=M`: page N (from 1) of M rows (default 30, at most
//     100, GitHub's limits); `Link: <.../<name>?page=N+1&per_page=M>;
//     rel="next"` when rows follow the page. A page past the end is an
//     empty array.
//   - `offset=N&limit=M`: M rows (default 30, at most 100) from the N-th
//     (from 0); `Link: <...?offset=N+M&limit=M>; rel="next"` when rows
//     follow.
//   - `after_id=X&limit=M`: M rows with an id above X (keyset pagination);
//     `Link: <...?after_id=<last id>&limit=M>; rel="next"` when rows follow.
//   - `X-Total-Count`: the number of rows now (json-server's header).
//   - A malformed or negative number is 400.
//
// It leaves out: sorting and filtering on anything but the id,
// authentication, rate limits (Control's RateLimit answers 429 with a
// Retry-After), `rel="prev"`, `"first"` and `"last"` links.
//
// Delete and Insert change the collection between requests (Control's
// OnRequest acts at the moment a request arrives, before it is answered):
// a delete on a page already read slides the row after that page onto it,
// an insert slides the page's last row onto the next page.
type Offset struct {
	*Control

	mu   sync.Mutex
	rows []OffsetRow // sorted by id
	step int64
}

// NewOffset starts the fake with no rows; Append adds rows step ids apart
// (step 1: dense ids).
func NewOffset(t testing.TB, step int64) *Offset {
	t.Helper()
	if step < 1 {
		t.Fatalf("fakeapi: NewOffset: step %d < 1", step)
	}
	o := &Offset{step: step}
	o.Control = start(t, http.HandlerFunc(o.serve), func(w http.ResponseWriter, now, until time.Time) time.Time {
		nb := retryAfter(w, now, until)
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "API rate limit exceeded"})
		return nb
	})
	return o
}

// Append adds n rows after the last one, step ids apart, and returns their
// ids.
func (o *Offset) Append(n int) []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var last int64
	if len(o.rows) > 0 {
		last = o.rows[len(o.rows)-1].ID
	}
	ids := make([]int64, n)
	for i := range ids {
		last += o.step
		ids[i] = last
		o.rows = append(o.rows, OffsetRow{ID: last, Name: fmt.Sprintf("row %d", last)})
	}
	return ids
}

// Insert adds a row with id in its place; false when the id is taken.
func (o *Offset) Insert(id int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	i, found := slices.BinarySearchFunc(o.rows, id, func(r OffsetRow, id int64) int { return cmpInt(r.ID, id) })
	if found {
		return false
	}
	o.rows = slices.Insert(o.rows, i, OffsetRow{ID: id, Name: fmt.Sprintf("row %d", id)})
	return true
}

// Delete removes the row with id; false when there is none.
func (o *Offset) Delete(id int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	i, found := slices.BinarySearchFunc(o.rows, id, func(r OffsetRow, id int64) int { return cmpInt(r.ID, id) })
	if found {
		o.rows = slices.Delete(o.rows, i, i+1)
	}
	return found
}

// IDs returns the ids of the rows now, ascending.
func (o *Offset) IDs() []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := make([]int64, len(o.rows))
	for i, r := range o.rows {
		ids[i] = r.ID
	}
	return ids
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (o *Offset) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	num := func(name string, def, lo, hi int64) (int64, bool) {
		s := q.Get(name)
		if s == "" {
			return def, true
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < lo {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": fmt.Sprintf("invalid %s %q", name, s)})
			return 0, false
		}
		return min(n, hi), true
	}
	self := baseURL(r) + r.URL.Path + "?"
	o.mu.Lock()
	rows := slices.Clone(o.rows)
	o.mu.Unlock()
	var page []OffsetRow
	next := ""
	switch {
	case q.Has("after_id"):
		after, ok := num("after_id", 0, 0, 1<<62)
		if !ok {
			return
		}
		limit, ok := num("limit", 30, 1, 100)
		if !ok {
			return
		}
		o.count(OffsetByKeyset)
		i, _ := slices.BinarySearchFunc(rows, after+1, func(r OffsetRow, id int64) int { return cmpInt(r.ID, id) })
		page = rows[i:min(len(rows), i+int(limit))]
		if i+len(page) < len(rows) && len(page) > 0 {
			next = fmt.Sprintf("%safter_id=%d&limit=%d", self, page[len(page)-1].ID, limit)
		}
	case q.Has("offset"):
		off, ok := num("offset", 0, 0, 1<<31)
		if !ok {
			return
		}
		limit, ok := num("limit", 30, 1, 100)
		if !ok {
			return
		}
		o.count(OffsetByOffset)
		from := min(int(off), len(rows))
		page = rows[from:min(len(rows), from+int(limit))]
		if from+int(limit) < len(rows) {
			next = fmt.Sprintf("%soffset=%d&limit=%d", self, off+limit, limit)
		}
	default:
		n, ok := num("page", 1, 1, 1<<31)
		if !ok {
			return
		}
		per, ok := num("per_page", 30, 1, 100)
		if !ok {
			return
		}
		o.count(OffsetByPage)
		from := min(int((n-1)*per), len(rows))
		page = rows[from:min(len(rows), from+int(per))]
		if from+int(per) < len(rows) {
			next = fmt.Sprintf("%spage=%d&per_page=%d", self, n+1, per)
		}
	}
	if next != "" {
		w.Header().Set("Link", "<"+next+`>; rel="next"`)
	}
	w.Header().Set("X-Total-Count", strconv.Itoa(len(rows)))
	if page == nil {
		page = []OffsetRow{}
	}
	writeJSON(w, http.StatusOK, page)
}
