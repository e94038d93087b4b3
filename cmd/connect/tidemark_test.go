package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The operator commands read the input's cursor keys from --cursor-key
// ID=env:VARIABLE or ID=file:PATH; the active key defaults to the last one,
// and a malformed flag or a key that is not 32 bytes is refused without
// quoting the key.
func TestCursorKeyFlags(t *testing.T) {
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	short := base64.StdEncoding.EncodeToString([]byte("too-short"))
	t.Setenv("TM_TEST_KEY", key)
	t.Setenv("TM_TEST_SHORT", short)
	file := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(file, []byte(key+"\n"), 0o600))

	tests := []struct {
		name       string
		flags      []string
		active     string
		wantIDs    []string
		wantActive string
		wantErr    string
	}{
		{name: "none", wantIDs: nil},
		{name: "env", flags: []string{"a=env:TM_TEST_KEY"}, wantIDs: []string{"a"}, wantActive: "a"},
		{name: "file and env, last is active", flags: []string{"old=file:" + file, "new=env:TM_TEST_KEY"}, wantIDs: []string{"old", "new"}, wantActive: "new"},
		{name: "explicit active", flags: []string{"old=file:" + file, "new=env:TM_TEST_KEY"}, active: "old", wantIDs: []string{"old", "new"}, wantActive: "old"},
		{name: "active not listed", flags: []string{"a=env:TM_TEST_KEY"}, active: "b", wantErr: `--cursor-active-key "b" is not one of`},
		{name: "no id", flags: []string{"env:TM_TEST_KEY"}, wantErr: "want ID=env:VARIABLE or ID=file:PATH"},
		{name: "unknown source", flags: []string{"a=vault:x"}, wantErr: "want ID=env:VARIABLE or ID=file:PATH"},
		{name: "unset variable", flags: []string{"a=env:TM_TEST_UNSET"}, wantErr: "environment variable TM_TEST_UNSET is not set"},
		{name: "short key", flags: []string{"a=env:TM_TEST_SHORT"}, wantErr: "not 32 bytes in base64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys, active, err := cursorKeys(tc.flags, tc.active)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.NotContains(t, err.Error(), key)
				assert.NotContains(t, err.Error(), short)
				return
			}
			require.NoError(t, err)
			var ids []string
			for _, k := range keys {
				ids = append(ids, k.ID)
				assert.Len(t, k.Key, 32)
			}
			assert.Equal(t, tc.wantIDs, ids)
			assert.Equal(t, tc.wantActive, active)
		})
	}
}
