package fakeapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Kubernetes request kinds counted by Served.
const (
	// KubernetesFreshList is a list request without `continue`: a new
	// consistent snapshot.
	KubernetesFreshList = "fresh_list"
	// KubernetesContinue is a list request with `continue`.
	KubernetesContinue = "continue"
	// KubernetesEmptyChunk is an answer with zero items and a continue
	// token: every object of its chunk was filtered out by the label
	// selector.
	KubernetesEmptyChunk = "empty_chunk"
)

// Kubernetes is a fake Kubernetes API server serving the list of the
// ConfigMaps of a namespace (GET /api/v1/namespaces/{ns}/configmaps) with
// the chunking the Kubernetes API documents ("Retrieving large results
// sets in chunks" in the API concepts, ListMeta in the API reference)
// (create it with NewKubernetes).
//
// It follows:
//
//   - `limit=N` returns at most N items and, when more remain,
//     `metadata.continue`, an opaque token, and `metadata.remainingItemCount`;
//     the last chunk has no continue token. Without `limit` (or limit=0)
//     the whole list is one answer.
//   - One `metadata.resourceVersion` per list: every chunk fetched with the
//     continue tokens of one list is served from the snapshot of the
//     list's first request, whatever was created, changed or deleted
//     since (a consistent snapshot across the pages). Items come in key
//     order (by name within the namespace), each with its own
//     metadata.resourceVersion and uid.
//   - A continue token whose snapshot has been compacted is `410 Gone`, a
//     Status with reason `Expired` and the message "The provided continue
//     parameter is too old to display a consistent list result. You can
//     start a new list without the continue parameter, or use the continue
//     token in this response to retrieve the remainder of the results.
//     ...", whose `metadata.continue` continues inconsistently (at the
//     current resourceVersion). A fresh list without `continue` is the
//     consistent recovery. A token the server did not issue is 400
//     BadRequest.
//   - A namespace without ConfigMaps lists empty (a list does not 404).
//   - `labelSelector=key=value` (one equality requirement) filters the
//     objects of a chunk after the chunk is cut at `limit`, the case the
//     API reference's `limit` parameter documents: "Setting a limit may
//     return fewer than the requested amount of items (up to zero items) in
//     the event all requested objects are filtered out and clients should
//     only use the presence of the continue field to determine whether more
//     results are available." A chunk whose objects all lack the label has
//     zero items and a continue token. With a selector
//     `remainingItemCount` is left out, as ListMeta says.
//   - Authentication with `Authorization: Bearer <token>`; anything else is
//     401 Status Unauthorized.
//   - The rate-limit answer (API Priority and Fairness): 429 with
//     `Retry-After` in seconds, a Status with reason TooManyRequests and
//     `details.retryAfterSeconds`.
//
// It leaves out: watches, `resourceVersion`/`resourceVersionMatch` on
// the request, field selectors and label selectors other than one
// equality, the watch cache, other
// resources and API groups, Table output, and compaction on a timer (only
// when ExpireNext says so).
//
// ExpireNext compacts the history when the next request with a continue
// token arrives (after one more write), so that request and every
// outstanding token get the 410.
type Kubernetes struct {
	*Control
	token string

	mu         sync.Mutex
	rev        int64
	compacted  int64
	expireNext bool
	objects    map[string][]k8sVersion // "ns/name" -> versions, oldest first
	nextUID    int
}

type k8sVersion struct {
	rev     int64
	deleted bool
	uid     string
	created time.Time
	data    map[string]string
	labels  map[string]string
}

// NewKubernetes starts a fake API server that demands
// `Authorization: Bearer <token>`.
func NewKubernetes(t testing.TB, token string) *Kubernetes {
	t.Helper()
	k := &Kubernetes{token: token, objects: map[string][]k8sVersion{}, rev: 1}
	k.Control = start(t, http.HandlerFunc(k.serve), func(w http.ResponseWriter, now, until time.Time) time.Time {
		nb := retryAfter(w, now, until)
		secs := int(nb.Sub(now) / time.Second)
		writeJSON(w, http.StatusTooManyRequests, k8sStatus(http.StatusTooManyRequests, "TooManyRequests",
			"Too many requests, please try again later.", map[string]any{"details": map[string]any{"retryAfterSeconds": secs}}))
		return nb
	})
	return k
}

// Create creates ConfigMaps named prefix-1 … prefix-n in ns (one write
// each) and returns their names.
func (k *Kubernetes) Create(ns, prefix string, n int) []string {
	return k.CreateLabeled(ns, prefix, n, nil)
}

// CreateLabeled is Create with the labels given on every object.
func (k *Kubernetes) CreateLabeled(ns, prefix string, n int, labels map[string]string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, 0, n)
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		k.rev++
		k.nextUID++
		k.objects[ns+"/"+name] = append(k.objects[ns+"/"+name], k8sVersion{
			rev: k.rev, uid: fmt.Sprintf("6f1c0b6e-0000-4000-8000-%012d", k.nextUID),
			created: time.Now().UTC().Truncate(time.Second), data: map[string]string{"n": strconv.Itoa(i)}, labels: labels,
		})
		out = append(out, name)
	}
	return out
}

// Delete deletes ConfigMap ns/name (one write).
func (k *Kubernetes) Delete(ns, name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	vs := k.objects[ns+"/"+name]
	if len(vs) == 0 || vs[len(vs)-1].deleted {
		return
	}
	k.rev++
	k.objects[ns+"/"+name] = append(vs, k8sVersion{rev: k.rev, deleted: true})
}

// ExpireNext arranges for the next request with a continue token to find
// its snapshot compacted.
func (k *Kubernetes) ExpireNext() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.expireNext = true
}

func k8sStatus(code int, reason, msg string, extra map[string]any) map[string]any {
	st := map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Failure",
		"message": msg, "reason": reason, "code": code}
	for k, v := range extra {
		st[k] = v
	}
	return st
}

// k8sContinue is the decoded continue token (the apiserver's own shape).
type k8sContinue struct {
	V     string `json:"v"`
	RV    int64  `json:"rv"`
	Start string `json:"start"`
}

var k8sPath = regexp.MustCompile(`^/api/v1/namespaces/([^/]+)/configmaps$`)

const k8sExpiredMessage = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."

func (k *Kubernetes) serve(w http.ResponseWriter, r *http.Request) {
	m := k8sPath.FindStringSubmatch(r.URL.Path)
	if m == nil || r.Method != http.MethodGet {
		writeJSON(w, http.StatusNotFound, k8sStatus(http.StatusNotFound, "NotFound", "the server could not find the requested resource", nil))
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+k.token {
		writeJSON(w, http.StatusUnauthorized, k8sStatus(http.StatusUnauthorized, "Unauthorized", "Unauthorized", nil))
		return
	}
	ns := m[1]
	q := r.URL.Query()
	limit := 0
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, k8sStatus(http.StatusBadRequest, "BadRequest", "limit must be a non-negative integer", nil))
			return
		}
		limit = n
	}
	selKey, selValue, selected := "", "", q.Has("labelSelector")
	if selected {
		var ok bool
		selKey, selValue, ok = strings.Cut(q.Get("labelSelector"), "=")
		if !ok || selKey == "" || strings.ContainsAny(selKey+selValue, ",!=()") {
			writeJSON(w, http.StatusBadRequest, k8sStatus(http.StatusBadRequest, "BadRequest", "unable to parse requirement: the fake serves one key=value requirement", nil))
			return
		}
	}

	k.mu.Lock()
	defer k.mu.Unlock()
	rv, start := k.rev, ""
	if tok := q.Get("continue"); tok != "" {
		c, ok := decodeK8sContinue(tok)
		if !ok {
			writeJSON(w, http.StatusBadRequest, k8sStatus(http.StatusBadRequest, "BadRequest", "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)", nil))
			return
		}
		if k.expireNext {
			k.expireNext = false
			k.rev++ // a write elsewhere, then the compaction
			k.compacted = k.rev
		}
		switch {
		case c.RV == -1:
			rv = k.rev // inconsistent continuation: the current state
		case c.RV < k.compacted:
			k.countExpired()
			st := k8sStatus(http.StatusGone, "Expired", k8sExpiredMessage, nil)
			st["metadata"] = map[string]any{"continue": encodeK8sContinue(-1, c.Start)}
			writeJSON(w, http.StatusGone, st)
			return
		default:
			rv = c.RV
		}
		start = c.Start
		k.count(KubernetesContinue)
	} else {
		k.count(KubernetesFreshList)
	}

	type item struct {
		name string
		v    k8sVersion
	}
	var items []item
	for key, vs := range k.objects {
		name, ok := strings.CutPrefix(key, ns+"/")
		if !ok || name < start {
			continue
		}
		// The version visible at rv.
		var at *k8sVersion
		for i := range vs {
			if vs[i].rev <= rv {
				at = &vs[i]
			}
		}
		if at != nil && !at.deleted {
			items = append(items, item{name, *at})
		}
	}
	slices.SortFunc(items, func(a, b item) int { return strings.Compare(a.name, b.name) })
	page := items
	meta := map[string]any{"resourceVersion": strconv.FormatInt(rv, 10)}
	if limit > 0 && len(items) > limit {
		page = items[:limit]
		meta["continue"] = encodeK8sContinue(rv, page[len(page)-1].name+"\x00")
		if !selected {
			meta["remainingItemCount"] = len(items) - limit
		}
	}
	out := make([]any, 0, len(page))
	for _, it := range page {
		if selected && it.v.labels[selKey] != selValue {
			continue
		}
		md := map[string]any{
			"name": it.name, "namespace": ns, "uid": it.v.uid,
			"resourceVersion":   strconv.FormatInt(it.v.rev, 10),
			"creationTimestamp": it.v.created.Format(time.RFC3339),
		}
		if len(it.v.labels) > 0 {
			md["labels"] = it.v.labels
		}
		out = append(out, map[string]any{
			"metadata": md,
			"data":     it.v.data,
		})
	}
	if len(out) == 0 && meta["continue"] != nil {
		k.count(KubernetesEmptyChunk)
	}
	writeJSON(w, http.StatusOK, map[string]any{"kind": "ConfigMapList", "apiVersion": "v1", "metadata": meta, "items": out})
}

func encodeK8sContinue(rv int64, start string) string {
	b, _ := json.Marshal(k8sContinue{V: "meta.k8s.io/v1", RV: rv, Start: start})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeK8sContinue(s string) (k8sContinue, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return k8sContinue{}, false
	}
	var c k8sContinue
	if json.Unmarshal(raw, &c) != nil || c.V != "meta.k8s.io/v1" || (c.RV <= 0 && c.RV != -1) {
		return k8sContinue{}, false
	}
	return c, true
}
