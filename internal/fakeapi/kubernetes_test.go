package fakeapi

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

type k8sList struct {
	Kind     string `json:"kind"`
	Metadata struct {
		ResourceVersion    string `json:"resourceVersion"`
		Continue           string `json:"continue"`
		RemainingItemCount *int   `json:"remainingItemCount"`
	} `json:"metadata"`
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	} `json:"items"`
	Reason string `json:"reason"`
}

func k8sGet(t *testing.T, k *Kubernetes, ns, query string) (k8sList, answer) {
	t.Helper()
	a := get(t, k.URL()+"/api/v1/namespaces/"+ns+"/configmaps?"+query, "Authorization", "Bearer tok")
	var l k8sList
	a.json(t, &l)
	return l, a
}

// TestKubernetesChunksAreOneSnapshot: the chunks of one list share its
// resourceVersion and show the snapshot of its first request, though
// objects are created and deleted meanwhile; the last chunk has no
// continue token; a fresh list sees the changes.
func TestKubernetesChunksAreOneSnapshot(t *testing.T) {
	k := NewKubernetes(t, "tok")
	names := k.Create("team-a", "cm", 7)
	k.Create("team-b", "cm", 2)
	l, a := k8sGet(t, k, "team-a", "limit=3")
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, "ConfigMapList", l.Kind)
	rv := l.Metadata.ResourceVersion
	require.NotNil(t, l.Metadata.RemainingItemCount)
	require.Equal(t, 4, *l.Metadata.RemainingItemCount)
	got := []string{}
	for _, it := range l.Items {
		got = append(got, it.Metadata.Name)
	}
	k.Delete("team-a", "cm-7")
	k.Create("team-a", "new", 1)
	for l.Metadata.Continue != "" {
		l, a = k8sGet(t, k, "team-a", "limit=3&continue="+url.QueryEscape(l.Metadata.Continue))
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		require.Equal(t, rv, l.Metadata.ResourceVersion, "one resourceVersion per list")
		for _, it := range l.Items {
			got = append(got, it.Metadata.Name)
		}
	}
	require.ElementsMatch(t, names, got, "the snapshot of the first request")
	require.Equal(t, []string{"cm-1", "cm-2", "cm-3", "cm-4", "cm-5", "cm-6", "cm-7"}, got, "in key order")

	fresh, _ := k8sGet(t, k, "team-a", "")
	require.Len(t, fresh.Items, 7, "cm-7 deleted, new-1 created")
	require.NotEqual(t, rv, fresh.Metadata.ResourceVersion)
	require.Empty(t, fresh.Metadata.Continue)
}

// TestKubernetesSelectorLeavesEmptyChunks: with a label selector the
// objects of a chunk are filtered after it is cut at `limit`, so a chunk
// whose objects all lack the label has zero items and a continue token
// (the case the API reference's `limit` documents); remainingItemCount is
// left out; following the tokens lists exactly the labelled objects.
func TestKubernetesSelectorLeavesEmptyChunks(t *testing.T) {
	k := NewKubernetes(t, "tok")
	k.Create("team-a", "aa", 6)
	want := k.CreateLabeled("team-a", "cm", 3, map[string]string{"app": "tidemark"})
	l, a := k8sGet(t, k, "team-a", "limit=3&labelSelector=app%3Dtidemark")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	require.Empty(t, l.Items, "the first chunk's objects are all filtered out")
	require.NotEmpty(t, l.Metadata.Continue, "and it still says more results are available")
	require.Nil(t, l.Metadata.RemainingItemCount, "unknown under a selector")
	var got []string
	chunks := 1
	for l.Metadata.Continue != "" {
		l, a = k8sGet(t, k, "team-a", "limit=3&labelSelector=app%3Dtidemark&continue="+url.QueryEscape(l.Metadata.Continue))
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		chunks++
		for _, it := range l.Items {
			got = append(got, it.Metadata.Name)
		}
	}
	require.Equal(t, want, got)
	require.Equal(t, 3, chunks)
	require.Equal(t, 2, k.Served(KubernetesEmptyChunk))
	_, a = k8sGet(t, k, "team-a", "limit=3&labelSelector=app!%3Dx")
	require.Equal(t, http.StatusBadRequest, a.status, "a selector the fake does not serve is refused, not ignored")
}

// TestKubernetesExpiredContinue: a continue token of a compacted snapshot
// answers 410 Expired; a fresh list works.
func TestKubernetesExpiredContinue(t *testing.T) {
	k := NewKubernetes(t, "tok")
	k.Create("team-a", "cm", 4)
	l, _ := k8sGet(t, k, "team-a", "limit=2")
	k.ExpireNext()
	gone, a := k8sGet(t, k, "team-a", "limit=2&continue="+url.QueryEscape(l.Metadata.Continue))
	require.Equal(t, http.StatusGone, a.status)
	require.Equal(t, "Expired", gone.Reason)
	require.Contains(t, string(a.body), "The provided continue parameter is too old")
	require.Equal(t, 1, k.ExpiredAnswers())
	_, a = k8sGet(t, k, "team-a", "limit=2&continue="+url.QueryEscape(l.Metadata.Continue))
	require.Equal(t, http.StatusGone, a.status, "the token stays expired")
	fresh, a := k8sGet(t, k, "team-a", "limit=2")
	require.Equal(t, http.StatusOK, a.status)
	require.Len(t, fresh.Items, 2)
	require.Equal(t, 2, k.Served(KubernetesFreshList))

	_, a = k8sGet(t, k, "team-a", "continue=not-a-token")
	require.Equal(t, http.StatusBadRequest, a.status)
}

func TestKubernetesRateLimitAnswer(t *testing.T) {
	k := NewKubernetes(t, "tok")
	rateLimitCase(t, k.Control, k.URL()+"/api/v1/namespaces/x/configmaps", "TooManyRequests", true, "Authorization", "Bearer tok")
}
