package storeconfig

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/awscreds"
	"github.com/tidemark/tidemark/internal/store"

	"github.com/tidemark/tidemark/internal/dynamostore"
)

// DynamoFields inside an object (as the checkpoint store's config uses
// them) parse to the DynamoConfig the fields document.
func TestDynamoFieldsParse(t *testing.T) {
	spec := service.NewConfigSpec().Field(service.NewObjectField("dynamodb", DynamoFields()...))
	conf, err := spec.ParseYAML("dynamodb: {}", nil)
	require.NoError(t, err)
	cfg, err := DynamoConfigFromParsed(conf.Namespace("dynamodb"))
	require.NoError(t, err)
	require.Equal(t, dynamostore.DynamoConfig{Table: dynamostore.DefaultTable, MaxRetries: dynamostore.DefaultMaxRetries, MaxBackoff: dynamostore.DefaultMaxBackoff, CallTimeout: dynamostore.DefaultCallTimeout}, cfg)
	conf, err = spec.ParseYAML("dynamodb: {table: t-1, max_retries: 0, region: eu-west-1, create: true, endpoint: 'http://h:1', max_backoff: 100ms, call_timeout: 2s}", nil)
	require.NoError(t, err)
	cfg, err = DynamoConfigFromParsed(conf.Namespace("dynamodb"))
	require.NoError(t, err)
	require.Equal(t, dynamostore.DynamoConfig{Table: "t-1", Region: "eu-west-1", Endpoint: "http://h:1", Create: true, MaxRetries: -1, MaxBackoff: 100 * time.Millisecond, CallTimeout: 2 * time.Second}, cfg)

	// The credentials object, with Redpanda Connect's field names.
	conf, err = spec.ParseYAML("dynamodb: {credentials: {profile: analytics, role: 'arn:aws:iam::1:role/r', role_external_id: x}}", nil)
	require.NoError(t, err)
	cfg, err = DynamoConfigFromParsed(conf.Namespace("dynamodb"))
	require.NoError(t, err)
	require.Equal(t, awscreds.Config{Profile: "analytics", Role: "arn:aws:iam::1:role/r", RoleExternalID: "x"}, cfg.Credentials)
	conf, err = spec.ParseYAML("dynamodb: {credentials: {id: AKID, secret: s, token: t}}", nil)
	require.NoError(t, err)
	cfg, err = DynamoConfigFromParsed(conf.Namespace("dynamodb"))
	require.NoError(t, err)
	require.Equal(t, awscreds.Config{ID: "AKID", Secret: "s", Token: "t"}, cfg.Credentials)
	conf, err = spec.ParseYAML("dynamodb: {credentials: {id: AKID}}", nil)
	require.NoError(t, err)
	_, err = DynamoConfigFromParsed(conf.Namespace("dynamodb"))
	require.ErrorContains(t, err, "id and secret go together")
}

// The memory backend of every component of one process is one store.
func TestCheckpointMemoryBackendIsShared(t *testing.T) {
	spec := service.NewConfigSpec().Field(service.NewObjectField("checkpoint", CheckpointFields()...))
	conf, err := spec.ParseYAML("checkpoint: {backend: memory}", nil)
	require.NoError(t, err)
	a, _, err := StoreFromParsed(t.Context(), conf.Namespace("checkpoint"), service.MockResources())
	require.NoError(t, err)
	b, _, err := StoreFromParsed(t.Context(), conf.Namespace("checkpoint"), service.MockResources())
	require.NoError(t, err)
	unwrap := func(s store.Store) store.Store {
		for {
			u, ok := s.(interface{ Unwrap() store.Store })
			if !ok {
				return s
			}
			s = u.Unwrap()
		}
	}
	require.Same(t, unwrap(a), unwrap(b))
}

// cursor_encryption reads keys from the environment and from files, and
// refuses what cannot be a key without quoting it.
func TestCursorEncryptionKeys(t *testing.T) {
	spec := service.NewConfigSpec().Field(service.NewObjectField("checkpoint", CheckpointFields()...))
	dir := t.TempDir()
	file := filepath.Join(dir, "k")
	k1 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	require.NoError(t, os.WriteFile(file, []byte(k1+"\n"), 0o600))
	t.Setenv("TEST_CURSOR_KEY", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32)))
	t.Setenv("TEST_CURSOR_KEY_SHORT", "c2hvcnQ=")
	for name, tc := range map[string]struct {
		yaml    string
		keys    []string
		active  string
		wantErr string
	}{
		"absent":   {yaml: "{}"},
		"no keys":  {yaml: "{cursor_encryption: {keys: []}}"},
		"file":     {yaml: "{cursor_encryption: {keys: [{id: a, file: '" + file + "'}]}}", keys: []string{"a"}},
		"rotation": {yaml: "{cursor_encryption: {active_id: b, keys: [{id: a, file: '" + file + "'}, {id: b, env: TEST_CURSOR_KEY}]}}", keys: []string{"a", "b"}, active: "b"},
		"both":     {yaml: "{cursor_encryption: {keys: [{id: a, file: '" + file + "', env: TEST_CURSOR_KEY}]}}", wantErr: "exactly one of env and file"},
		"unset":    {yaml: "{cursor_encryption: {keys: [{id: a, env: TEST_CURSOR_KEY_UNSET}]}}", wantErr: "is not set"},
		"short":    {yaml: "{cursor_encryption: {keys: [{id: a, env: TEST_CURSOR_KEY_SHORT}]}}", wantErr: "not 32 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			conf, err := spec.ParseYAML("checkpoint: "+tc.yaml, nil)
			require.NoError(t, err)
			keys, active, err := cursorKeysFromParsed(conf.Namespace("checkpoint"))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.NotContains(t, err.Error(), "c2hvcnQ")
				return
			}
			require.NoError(t, err)
			var ids []string
			for _, k := range keys {
				ids = append(ids, k.ID)
				require.Len(t, k.Key, 32)
			}
			require.Equal(t, tc.keys, ids)
			require.Equal(t, tc.active, active)
		})
	}
}

// Lint (ValidateCheckpoint) refuses every cursor_encryption block that run
// (StoreFromParsed) refuses, with the same reason, and neither quotes key
// material: duplicate key ids, an active_id no key has, a key that is not
// 32 bytes, an unset variable, and an active_id with no keys (which would
// otherwise store every cursor in clear without a word).
func TestLintRefusesEveryCursorEncryptionBlockRunRefuses(t *testing.T) {
	spec := service.NewConfigSpec().Field(service.NewObjectField("checkpoint", CheckpointFields()...))
	t.Setenv("TEST_LINT_KEY_A", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, 32)))
	t.Setenv("TEST_LINT_KEY_B", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{4}, 32)))
	t.Setenv("TEST_LINT_KEY_16", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 16)))
	for name, tc := range map[string]struct{ block, wantErr string }{
		"duplicate ids":     {"{keys: [{id: a, env: TEST_LINT_KEY_A}, {id: a, env: TEST_LINT_KEY_B}]}", "listed twice"},
		"unknown active_id": {"{active_id: c, keys: [{id: a, env: TEST_LINT_KEY_A}, {id: b, env: TEST_LINT_KEY_B}]}", `active key id "c" is not among the keys`},
		"16-byte key":       {"{keys: [{id: a, env: TEST_LINT_KEY_16}]}", "not 32 bytes"},
		"unset variable":    {"{keys: [{id: a, env: TEST_LINT_KEY_UNSET}]}", "TEST_LINT_KEY_UNSET is not set"},
		"active_id no keys": {"{active_id: k1, keys: []}", `active_id is "k1" but cursor_encryption.keys lists no key`},
		"two actives, none": {"{keys: [{id: a, env: TEST_LINT_KEY_A}, {id: b, env: TEST_LINT_KEY_B}]}", `active key id "" is not among the keys`},
	} {
		t.Run(name, func(t *testing.T) {
			conf, err := spec.ParseYAML("checkpoint: {backend: memory, cursor_encryption: "+tc.block+"}", nil)
			require.NoError(t, err)
			ck := conf.Namespace("checkpoint")
			lintErr := ValidateCheckpoint(ck)
			require.ErrorContains(t, lintErr, tc.wantErr, "lint")
			_, _, runErr := StoreFromParsed(t.Context(), ck, service.MockResources())
			require.ErrorContains(t, runErr, tc.wantErr, "run")
			for _, k := range []string{"TEST_LINT_KEY_A", "TEST_LINT_KEY_B", "TEST_LINT_KEY_16"} {
				require.NotContains(t, lintErr.Error()+runErr.Error(), os.Getenv(k))
			}
		})
	}
	// A valid block passes both; no block at all stores in clear.
	conf, err := spec.ParseYAML("checkpoint: {backend: memory, cursor_encryption: {active_id: b, keys: [{id: a, env: TEST_LINT_KEY_A}, {id: b, env: TEST_LINT_KEY_B}]}}", nil)
	require.NoError(t, err)
	require.NoError(t, ValidateCheckpoint(conf.Namespace("checkpoint")))
	st, _, err := StoreFromParsed(t.Context(), conf.Namespace("checkpoint"), service.MockResources())
	require.NoError(t, err)
	require.True(t, store.IsEncrypted(st))
	conf, err = spec.ParseYAML("checkpoint: {backend: memory}", nil)
	require.NoError(t, err)
	st, _, err = StoreFromParsed(t.Context(), conf.Namespace("checkpoint"), service.MockResources())
	require.NoError(t, err)
	require.False(t, store.IsEncrypted(st), "without keys, cursors are stored in clear")
}
