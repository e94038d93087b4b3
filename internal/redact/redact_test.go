package redact

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Encodings lists every form a secret must not survive in.
func encodings(v string) map[string]string {
	j, _ := json.Marshal(v)
	return map[string]string{
		"raw":        v,
		"query":      url.QueryEscape(v),
		"path":       url.PathEscape(v),
		"query_low":  strings.ToLower(url.QueryEscape(v)),
		"b64std":     base64.StdEncoding.EncodeToString([]byte(v)),
		"b64url":     base64.URLEncoding.EncodeToString([]byte(v)),
		"b64raw":     base64.RawStdEncoding.EncodeToString([]byte(v)),
		"b64rawurl":  base64.RawURLEncoding.EncodeToString([]byte(v)),
		"json":       string(j[1 : len(j)-1]),
		"json_slash": strings.ReplaceAll(string(j[1:len(j)-1]), "/", `\/`),
		"json_query": func() string { q, _ := json.Marshal(url.QueryEscape(v)); return string(q[1 : len(q)-1]) }(),
	}
}

func TestApplyReplacesEveryEncoding(t *testing.T) {
	for _, secret := range []string{
		"s3cr3t-token",
		"eyJhbGciOi/+==&x=<y>\"z\"",
		"cursor with spaces/and+plus?&=",
		"ünïcödé-cursor",
	} {
		s := New(0)
		s.Add(secret)
		for name, form := range encodings(secret) {
			t.Run(secret+"/"+name, func(t *testing.T) {
				text := "before " + form + " after"
				got := s.Apply(text)
				assert.NotContains(t, got, form)
				assert.Contains(t, got, Mask)
				assert.True(t, strings.HasPrefix(got, "before ") && strings.HasSuffix(got, " after"), got)
			})
		}
	}
}

func TestShortValuesAreNotRegistered(t *testing.T) {
	s := New(0)
	s.Add("asc", "2", "json1")
	assert.Equal(t, "asc 2 json1", s.Apply("asc 2 json1"))
}

func TestChildAppliesItsParent(t *testing.T) {
	root := New(0)
	root.Add("client-secret-1")
	child := root.Child(0)
	child.Add("cursor-abcdef")
	assert.Equal(t, Mask+" "+Mask, child.Apply("client-secret-1 cursor-abcdef"))
	assert.Equal(t, Mask+" cursor-abcdef", root.Apply("client-secret-1 cursor-abcdef"), "a child's values stay in the child")
}

func TestCapacityKeepsTheMostRecentlyAdded(t *testing.T) {
	s := New(2)
	s.Add("value-one", "value-two")
	s.Add("value-one") // refreshed: value-two is now the oldest
	s.Add("value-three")
	assert.Equal(t, Mask+" value-two "+Mask, s.Apply("value-one value-two value-three"))
}

func TestAddCredentialRegistersTheDecodedBasicPassword(t *testing.T) {
	s := New(0)
	s.AddCredential("Basic " + base64.StdEncoding.EncodeToString([]byte("alice:hunter2-pw")))
	got := s.Apply(`{"echo":"Basic YWxpY2U6aHVudGVyMi1wdw==","pw":"hunter2-pw","form":"password=hunter2-pw"}`)
	assert.NotContains(t, got, "hunter2-pw")
	assert.NotContains(t, got, "YWxpY2U6aHVudGVyMi1wdw")
}

func TestErrorKeepsTheCause(t *testing.T) {
	sentinel := errors.New("sentinel")
	s := New(0)
	s.Add("token-12345")
	err := s.Error(fmt.Errorf("got token-12345: %w", sentinel))
	require.Error(t, err)
	assert.Equal(t, "got "+Mask+": sentinel", err.Error())
	assert.ErrorIs(t, err, sentinel)
	plain := errors.New("nothing secret")
	assert.Same(t, plain, s.Error(plain))
	assert.NoError(t, s.Error(nil))
}

func TestNilSetIsANoOp(t *testing.T) {
	var s *Set
	s.Add("whatever-value")
	assert.Equal(t, "whatever-value", s.Apply("whatever-value"))
}
