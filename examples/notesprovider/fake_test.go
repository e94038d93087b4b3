package notesprovider_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidemark/tidemark/provider/providertest"
)

// fakeAPI serves the notes API of package notesprovider from memory, on
// 127.0.0.1. A fault armed for a notebook answers its next request.
type fakeAPI struct {
	mu        sync.Mutex
	notebooks map[string][]string // notebook -> note texts, seq 1..n
	order     []string
	armed     map[string]providertest.Fault
}

func newFakeAPI(t *testing.T, notebooks map[string]int) (*fakeAPI, string) {
	f := &fakeAPI{notebooks: map[string][]string{}, armed: map[string]providertest.Fault{}}
	for nb, n := range notebooks {
		f.order = append(f.order, nb)
		f.notebooks[nb] = []string{}
		for seq := 1; seq <= n; seq++ {
			f.notebooks[nb] = append(f.notebooks[nb], fmt.Sprintf("note %d of %s", seq, nb))
		}
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// noteID is the stable id of a note.
func noteID(nb string, seq int) string { return nb + "/" + strconv.Itoa(seq) }

// ids are the ids of every note of nb, in order.
func (f *fakeAPI) ids(nb string) []string {
	var out []string
	for seq := range f.notebooks[nb] {
		out = append(out, noteID(nb, seq+1))
	}
	return out
}

func (f *fakeAPI) arm(nb string, fault providertest.Fault) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed[nb] = fault
	return true
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/notebooks" {
		_ = json.NewEncoder(w).Encode(map[string]any{"notebooks": f.order})
		return
	}
	nb, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/notebooks/"), "/notes")
	notes, known := f.notebooks[nb]
	if !ok || !known {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	fault := f.armed[nb]
	delete(f.armed, nb)
	f.mu.Unlock()
	if providertest.WriteHTTPFault(w, fault, `{"notes":[{"seq":1,"id":`) {
		return
	}
	after, err1 := strconv.Atoi(r.URL.Query().Get("after"))
	limit, err2 := strconv.Atoi(r.URL.Query().Get("limit"))
	if err1 != nil || err2 != nil || after < 0 || limit < 1 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	type note struct {
		Seq  int    `json:"seq"`
		ID   string `json:"id"`
		Text string `json:"text"`
	}
	out := struct {
		Notes []note  `json:"notes"`
		Next  *string `json:"next,omitempty"`
	}{Notes: []note{}}
	end := min(after+limit, len(notes))
	for seq := after + 1; seq <= end; seq++ {
		out.Notes = append(out.Notes, note{Seq: seq, ID: noteID(nb, seq), Text: notes[seq-1]})
	}
	if end < len(notes) {
		next := strconv.Itoa(end)
		out.Next = &next
	}
	_ = json.NewEncoder(w).Encode(out)
}
