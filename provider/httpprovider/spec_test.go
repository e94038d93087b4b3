package httpprovider

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

func TestSpecDefaults(t *testing.T) {
	p := parseProvider(t, `
http:
  url: http://127.0.0.1:1/items
  successor: root = deleted()
`, nil, nil)
	c := p.cfg
	if c.Verb != "GET" || c.Timeout != 30*time.Second || c.MaxRetries != 5 || c.RateLimit != "" {
		t.Errorf("request defaults: verb %q timeout %s max_retries %d rate_limit %q", c.Verb, c.Timeout, c.MaxRetries, c.RateLimit)
	}
	if c.Backoff != (Backoff{Initial: 500 * time.Millisecond, Max: 10 * time.Second}) {
		t.Errorf("backoff defaults: %+v", c.Backoff)
	}
	if c.MaxResponseBytes != 64<<20 {
		t.Errorf("max_response_bytes default: %d", c.MaxResponseBytes)
	}
	want := provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, PositionKind: provider.KindInteger, Recovery: provider.RecoveryPark}
	if p.Contract() != want {
		t.Errorf("contract defaults: got %+v, want %+v", p.Contract(), want)
	}
	if p.Coordinate() != coord.KindInteger {
		t.Errorf("coordinate default: %s", p.Coordinate())
	}
	if !slices.Equal(c.ExpiredStatusCodes, []int{410}) || len(c.ExpiredBodyContains) != 0 {
		t.Errorf("expiry defaults: %v %q", c.ExpiredStatusCodes, c.ExpiredBodyContains)
	}
	if c.Body != nil || c.PartitionsURL != nil || c.Mappings.HasMore != nil || c.Mappings.CompleteThrough != nil ||
		c.Mappings.Marker != nil || c.Mappings.Sealed != nil || c.Mappings.EventSemantic != nil {
		t.Error("optional fields are set without being configured")
	}
	cur, err := p.RestartCursor(context.Background(), provider.Boundary{Partition: "a", Watermark: provider.Watermark{}})
	if err != nil || cur != nil {
		t.Errorf("default restart cursor: %q, %v; want the start (nil)", cur, err)
	}
	if _, err := p.Partitions(context.Background()); err != ErrNoDiscovery {
		t.Errorf("Partitions without partitions_url: %v, want ErrNoDiscovery", err)
	}
}

func TestSpecContract(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want provider.Contract
		kind coord.Kind
	}{
		{`
    empty_page: final_through_watermark
    tokens_may_rotate: true
    positions: dense
    exclusive_boundary: true
    snapshot_marker: true
    watermark_covers_positions: true
    events_may_be_withdrawn: true
    missing_successor: end_of_traversal
    coordinate: decimal
    position_type: decimal
    finality: source
    recovery: fresh_snapshot`,
			provider.Contract{EmptyPage: provider.EmptyFinalThroughWatermark, TokensMayRotate: true, OrderedPositions: true,
				PositionKind: provider.KindDecimal, DensePositions: true, ExclusiveBoundary: true, SnapshotMarker: true, WatermarkCoversPositions: true, EventsMayBeWithdrawn: true,
				MissingSuccessor: provider.MissingSuccessorEndsTraversal, Recovery: provider.RecoveryFreshSnapshot, Finality: provider.FinalitySource},
			coord.KindDecimal},
		{`
    watermark_covers_positions: true
    finality: source
    coordinate: timestamp`,
			provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, PositionKind: provider.KindTimestamp, WatermarkCoversPositions: true, Recovery: provider.RecoveryPark, Finality: provider.FinalitySource},
			coord.KindTimestamp},
		{`
    finality: lag
    finality_lag: 5m
    coordinate: timestamp`,
			provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, PositionKind: provider.KindTimestamp, Recovery: provider.RecoveryPark, Finality: provider.FinalityLag, FinalityLag: int64(5 * time.Minute)},
			coord.KindTimestamp},
		{`
    finality: lag
    finality_lag: "100"
    coordinate: decimal`,
			provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, PositionKind: provider.KindDecimal, Recovery: provider.RecoveryPark, Finality: provider.FinalityLag, FinalityLag: 100},
			coord.KindDecimal},
		{`
    finality: append_only_writer
    coordinate: string
    position_type: string`,
			provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, PositionKind: provider.KindString, Recovery: provider.RecoveryPark, Finality: provider.FinalityAppendOnlyWriter},
			coord.KindString},
		{`
    positions: ordered
    coordinate: string
    position_type: string`,
			provider.Contract{EmptyPage: provider.EmptyNoEvidence, OrderedPositions: true, PositionKind: provider.KindString, Recovery: provider.RecoveryPark},
			coord.KindString},
		{`
    empty_page: end_of_data
    positions: unordered
    coordinate: string
    recovery: restart_from_boundary`,
			provider.Contract{EmptyPage: provider.EmptyEndOfData, PositionKind: provider.KindInteger, Recovery: provider.RecoveryRestartFromBoundary},
			coord.KindString},
	} {
		p := parseProvider(t, `
http:
  url: http://127.0.0.1:1/items
  successor: root = this.next
  contract:`+tc.yaml, nil, nil)
		if p.Contract() != tc.want || p.Coordinate() != tc.kind {
			t.Errorf("contract %s:\ngot  %+v %s\nwant %+v %s", tc.yaml, p.Contract(), p.Coordinate(), tc.want, tc.kind)
		}
	}
}

func TestSpecRejects(t *testing.T) {
	base := "http:\n  url: http://127.0.0.1:1/items\n  successor: root = this.next\n"
	for name, tc := range map[string]struct{ yaml, want string }{
		"missing successor":    {"http:\n  url: http://127.0.0.1:1/items\n", "successor"},
		"missing url":          {"http:\n  successor: root = this.next\n", "url"},
		"bad empty_page":       {base + "  contract:\n    empty_page: maybe\n", "empty_page"},
		"bad positions":        {base + "  contract:\n    positions: sorted\n", "positions"},
		"bad coordinate":       {base + "  contract:\n    coordinate: float\n", "coordinate"},
		"bad position_type":    {base + "  contract:\n    position_type: float\n", "position_type"},
		"dense strings":        {base + "  contract:\n    positions: dense\n    position_type: string\n", "dense positions need integer or decimal"},
		"dense timestamps":     {base + "  contract:\n    positions: dense\n    coordinate: timestamp\n", "dense positions need integer or decimal"},
		"covers another kind":  {base + "  contract:\n    watermark_covers_positions: true\n    coordinate: decimal\n    position_type: integer\n", "watermark_covers_positions needs positions in the watermark's coordinate"},
		"bad recovery":         {base + "  contract:\n    recovery: pray\n", "recovery"},
		"2xx expired status":   {base + "  contract:\n    expired_status_codes: [200]\n", "expired_status_codes"},
		"empty expired body":   {base + "  contract:\n    expired_body_contains: [\"\"]\n", "expired_body_contains"},
		"unknown rate limit":   {base + "  rate_limit: nope\n", "rate_limit"},
		"bad verb":             {base + "  verb: \"GET ME\"\n", "verb"},
		"bad header name":      {base + "  headers:\n    \"X Bad\": v\n", "header name"},
		"bad mapping":          {base + "  events: root = this.(\n", "events"},
		"bad interpolation":    {"http:\n  url: http://x/${! this.( }\n  successor: root = this.next\n", "url"},
		"negative max_retries": {base + "  max_retries: -1\n", "max_retries"},
		"inverted backoff":     {base + "  backoff:\n    initial_interval: 2s\n    max_interval: 1s\n", "backoff"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tryParseProvider(tc.yaml, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

// TestFieldsDocumented checks the spec's promise: every field has a
// description and an example, and every field except the required and the
// optional-without-default ones has a default.
func TestFieldsDocumented(t *testing.T) {
	env := service.NewEmptyEnvironment()
	spec := service.NewConfigSpec().Fields(Fields()...)
	err := env.RegisterBatchInput("http_provider_docs", spec, func(*service.ParsedConfig, *service.Resources) (service.BatchInput, error) {
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	noDefault := map[string]bool{
		"url": true, "successor": true, "body": true, "event_semantic": true, "has_more": true,
		"complete_through": true, "marker": true, "sealed": true, "partitions_url": true,
		"partitions_body": true, "partitions_successor": true,
		"contract.position_type":  true, // not set: follows coordinate
		"contract.finality":       true, // not set: required when complete_through is mapped
		"contract.finality_lag":   true, // only with finality: lag
		"contract.first_position": true, // not set: no origin declared, the first page is not checked
		"contract.reread_window":  true, // only for a re-read window
		"pin":                     true, // not set: nothing pinned
		// Required inside their optional objects, or not set: no body.
		"bootstrap.url": true, "bootstrap.body": true, "bootstrap.cursor": true,
		"validate.url": true, "validate.body": true, "validate.valid": true,
		"incarnation.url": true, "incarnation.body": true, "incarnation.value": true,
		"incarnation.create.url": true, "incarnation.create.body": true,
	}
	var fields int
	env.WalkInputs(func(name string, view *service.ConfigView) {
		data, err := view.TemplateData()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range data.Fields {
			fields++
			if benthosField(f.FullName) {
				continue // built and documented by Benthos's own constructors
			}
			if strings.TrimSpace(f.Description) == "" {
				t.Errorf("field %s has no description", f.FullName)
			}
			if len(f.Examples) == 0 {
				t.Errorf("field %s has no example", f.FullName)
			}
			if f.Type != "object" && f.DefaultMarshalled == "" && !noDefault[f.FullName] {
				t.Errorf("field %s has no default", f.FullName)
			}
		}
	})
	if fields < 30 {
		t.Fatalf("walked %d fields, expected the whole spec", fields)
	}
}

func TestRestartCursorInterpolation(t *testing.T) {
	p := parseProvider(t, `
http:
  url: http://127.0.0.1:1/items
  successor: root = this.next
  contract:
    recovery: restart_from_boundary
    restart_cursor: '${! if @watermark == "" { "" } else { "since=" + @watermark + "&p=" + @partition } }'
`, nil, nil)
	cur, err := p.RestartCursor(context.Background(), provider.Boundary{Partition: "p1", Watermark: provider.IntegerWatermark(42)})
	if err != nil || string(cur) != "since=42&p=p1" {
		t.Fatalf("RestartCursor = %q, %v", cur, err)
	}
	cur, err = p.RestartCursor(context.Background(), provider.Boundary{Partition: "p1", Watermark: provider.Watermark{}})
	if err != nil || cur != nil {
		t.Fatalf("RestartCursor without watermark = %q, %v; want the start", cur, err)
	}
}

// restart_cursor may resume after the durable applied position (a source
// that resumes after a sequence number): metadata `applied`, empty when
// nothing was applied.
func TestRestartCursorFromTheAppliedPosition(t *testing.T) {
	p := parseProvider(t, `
http:
  url: http://127.0.0.1:1/items
  successor: root = this.next
  contract:
    recovery: restart_from_boundary
    restart_cursor: '${! if @applied == "" { "" } else { "after=" + @applied } }'
`, nil, nil)
	cur, err := p.RestartCursor(context.Background(), provider.Boundary{Partition: "p1", Applied: provider.IntPosition(9001), HasApplied: true})
	require.NoError(t, err)
	assert.Equal(t, "after=9001", string(cur))
	cur, err = p.RestartCursor(context.Background(), provider.Boundary{Partition: "p1"})
	require.NoError(t, err)
	assert.Nil(t, cur, "nothing applied: the partition's start")
}

// restart_cursor also sees the id of the event at the applied position
// (metadata `applied_id`), for sources that resume after an event id; it is
// empty when unknown, and so is `applied` when nothing was applied.
func TestRestartCursorAfterTheAppliedEventID(t *testing.T) {
	p := parseProvider(t, `
http:
  url: http://127.0.0.1:1/items
  successor: root = this.next
  contract:
    recovery: restart_from_boundary
    restart_cursor: '${! "after_id=" + @applied_id + "&after=" + @applied }'
`, nil, nil)
	for _, tc := range []struct {
		name string
		from provider.Boundary
		want string
	}{
		{"applied with its id", provider.Boundary{Partition: "p1", Applied: provider.IntPosition(7), HasApplied: true, AppliedID: "evt_7"}, "after_id=evt_7&after=7"},
		{"applied, id unknown", provider.Boundary{Partition: "p1", Applied: provider.IntPosition(7), HasApplied: true}, "after_id=&after=7"},
		{"nothing applied", provider.Boundary{Partition: "p1", AppliedID: "stale"}, "after_id=&after="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur, err := p.RestartCursor(context.Background(), tc.from)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(cur))
		})
	}
}

// benthosField reports whether a field comes from Benthos's own field
// constructors (TLS and the request signers), documented by Benthos.
func benthosField(name string) bool {
	for _, p := range []string{"tls", "oauth", "basic_auth", "jwt"} {
		if name == p || strings.HasPrefix(name, p+".") {
			return true
		}
	}
	return false
}

// Lint names an unknown value of an enumerated contract field together
// with the values it accepts.
func TestLintListsTheValuesOfEnumeratedContractFields(t *testing.T) {
	env := service.GlobalEnvironment().Clone()
	require.NoError(t, env.RegisterInput("tm_lint_probe", service.NewConfigSpec().Field(service.NewObjectField("http", Fields()...)),
		func(*service.ParsedConfig, *service.Resources) (service.Input, error) { return nil, nil }))
	for field, want := range map[string]string{
		"positions: sorted":       `contract.positions: "sorted" is not one of unordered, ordered, dense`,
		"position_type: float":    `contract.position_type: "float" is not one of integer, decimal, timestamp, string`,
		"empty_page: maybe":       `contract.empty_page: "maybe" is not one of no_evidence, end_of_data, final_through_watermark`,
		"recovery: pray":          `contract.recovery: "pray" is not one of park, restart_from_boundary, fresh_snapshot`,
		"missing_successor: stop": `contract.missing_successor: "stop" is not one of poll, end_of_traversal`,
	} {
		yaml := "input:\n  tm_lint_probe:\n    http:\n      url: http://127.0.0.1:1/\n      successor: root = deleted()\n      contract:\n        " + field + "\noutput:\n  drop: {}\n"
		err := env.NewStreamBuilder().SetYAML(yaml)
		require.Error(t, err, field)
		assert.Contains(t, err.Error(), want, field)
	}
	b := env.NewStreamBuilder()
	require.NoError(t, b.SetYAML("input:\n  tm_lint_probe:\n    http:\n      url: http://127.0.0.1:1/\n      successor: root = deleted()\n      contract:\n        positions: dense\n        position_type: decimal\n        coordinate: decimal\noutput:\n  drop: {}\n"), "valid values lint clean")
}

// A config is refused at run (New) when it maps complete_through without
// declaring its finality, declares coverage without source finality, or
// declares a lag that does not fit its coordinate; each error names the
// field and what to declare instead.
func TestSpecRefusesUndeclaredOrUnfitFinality(t *testing.T) {
	base := "http:\n  url: http://127.0.0.1:1/items\n  successor: root = this.next\n"
	ct := base + "  complete_through: root = this.through\n"
	for name, tc := range map[string]struct{ yaml, want string }{
		"complete_through without finality":      {ct, "complete_through is mapped but contract.finality is not declared"},
		"the error offers the three choices":     {ct, "source (the source certifies it"},
		"covers under append_only_writer":        {ct + "  contract:\n    finality: append_only_writer\n    watermark_covers_positions: true\n", "watermark_covers_positions needs finality: source, not append_only_writer"},
		"final-through empty pages under a lag":  {ct + "  contract:\n    finality: lag\n    finality_lag: \"5\"\n    empty_page: final_through_watermark\n", "final_through_watermark needs finality: source, not lag"},
		"lag without finality_lag":               {ct + "  contract:\n    finality: lag\n", "positive contract.finality_lag"},
		"lag under a string coordinate":          {ct + "  contract:\n    finality: lag\n    finality_lag: \"5\"\n    coordinate: string\n", "a string coordinate has no arithmetic"},
		"a duration under an integer coordinate": {ct + "  contract:\n    finality: lag\n    finality_lag: 5m\n", "not an integer"},
		"finality_lag without lag":               {ct + "  contract:\n    finality: source\n    finality_lag: \"5\"\n", "finality_lag is set but contract.finality is source"},
		"unknown finality":                       {ct + "  contract:\n    finality: trust_me\n", "finality"},
	} {
		t.Run(name, func(t *testing.T) {
			conf, err := testSpec().ParseYAML(tc.yaml, nil)
			if err == nil {
				_, err = FromParsed(conf.Namespace("http"), service.MockResources(), nil)
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	p := parseProvider(t, ct+"  contract:\n    finality: none\n", nil, nil)
	assert.Equal(t, provider.FinalityNone, p.Contract().Finality, "finality: none declares that the watermark is only recorded")
}

// Lint refuses complete_through without a declared finality, coverage
// without source finality, and (best effort) a complete_through under
// finality: source that reads the field event_position reads from the
// page's own last event.
func TestLintFinality(t *testing.T) {
	env := service.GlobalEnvironment().Clone()
	require.NoError(t, env.RegisterInput("tm_lint_probe", service.NewConfigSpec().Field(service.NewObjectField("http", Fields()...).LintRule(ObjectLint())),
		func(*service.ParsedConfig, *service.Resources) (service.Input, error) { return nil, nil }))
	yaml := func(body string) string {
		return "input:\n  tm_lint_probe:\n    http:\n      url: http://127.0.0.1:1/\n      successor: root = deleted()\n" + body + "output:\n  drop: {}\n"
	}
	for name, tc := range map[string]struct{ body, want string }{
		"complete_through without finality":        {"      complete_through: root = this.last_seq\n", "complete_through is mapped but contract.finality is not declared"},
		"covers without source":                    {"      contract:\n        watermark_covers_positions: true\n", "watermark_covers_positions needs finality: source, not none"},
		"final-through empty pages without source": {"      complete_through: root = this.t\n      contract:\n        finality: append_only_writer\n        empty_page: final_through_watermark\n", "final_through_watermark needs finality: source, not append_only_writer"},
		"lag without finality_lag":                 {"      complete_through: root = this.t\n      contract:\n        finality: lag\n", "finality lag needs contract.finality_lag"},
		"a listing's last key as source":           {"      event_position: root = this.Key\n      complete_through: root = this.Contents.index(-1).Key\n      contract:\n        finality: source\n", "complete_through reads `Key` of the page's own last event"},
		"the greatest position as source":          {"      event_position: root = this.seq\n      complete_through: root = this.results.map_each(r -> r.seq).max()\n      contract:\n        finality: source\n", "certifies nothing"},
	} {
		t.Run(name, func(t *testing.T) {
			err := env.NewStreamBuilder().SetYAML(yaml(tc.body))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	for name, body := range map[string]string{
		"a source watermark":                "      event_position: root = this.seq\n      complete_through: root = this.last_seq\n      contract:\n        finality: source\n        empty_page: final_through_watermark\n",
		"the last key as a named assertion": "      event_position: root = this.Key\n      complete_through: root = this.Contents.index(-1).Key\n      contract:\n        finality: append_only_writer\n",
		"a lag":                             "      complete_through: root = this.t\n      contract:\n        coordinate: timestamp\n        finality: lag\n        finality_lag: 5m\n",
		"recorded only":                     "      complete_through: root = this.t\n      contract:\n        finality: none\n",
	} {
		assert.NoError(t, env.NewStreamBuilder().SetYAML(yaml(body)), name)
	}
}

// Lint refuses offset pagination that cannot prove a page continues the
// previous one (positions not dense, no overlap check, no explicit
// offset_unproven) and anything with which offset_unproven would claim
// completeness; New refuses the same at start-up.
func TestLintRefusesOffsetPaginationThatCannotProveContinuity(t *testing.T) {
	env := service.GlobalEnvironment().Clone()
	require.NoError(t, env.RegisterInput("tm_lint_offset", service.NewConfigSpec().Field(service.NewObjectField("http", Fields()...).LintRule(ObjectLint())),
		func(*service.ParsedConfig, *service.Resources) (service.Input, error) { return nil, nil }))
	const head = "http:\n  url: http://127.0.0.1:1/\n  successor: root = deleted()\n"
	for _, tc := range []struct {
		name, http, lint string // lint "": lints clean
	}{
		{"offset over ordered positions", head + "  contract:\n    pagination: offset\n", "contract.pagination: offset over positions that are not dense"},
		{"offset over dense positions", head + "  contract:\n    pagination: offset\n    positions: dense\n", ""},
		{"offset with the overlap check", head + "  contract:\n    pagination: offset\n    offset_overlap: true\n    missing_successor: end_of_traversal\n", ""},
		{"offset declared unproven", head + "  contract:\n    pagination: offset\n    offset_unproven: true\n", ""},
		{"unproven ending a traversal", head + "  contract:\n    pagination: offset\n    offset_unproven: true\n    missing_successor: end_of_traversal\n", "missing_successor must be poll"},
		{"unproven with complete_through", head + "  complete_through: root = this.last\n  contract:\n    pagination: offset\n    offset_unproven: true\n", "complete_through cannot be mapped"},
		{"overlap without offset", head + "  contract:\n    offset_overlap: true\n", "need pagination: offset"},
		{"keyset over unordered positions", head + "  contract:\n    pagination: keyset\n    positions: unordered\n", "keyset needs ordered"},
		{"unknown pagination", head + "  contract:\n    pagination: cursor\n", `contract.pagination: "cursor" is not one of token, keyset, offset`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := "input:\n  tm_lint_offset:\n" + indent(tc.http, "    ") + "\noutput:\n  drop: {}\n"
			err := env.NewStreamBuilder().SetYAML(yaml)
			_, newErr := tryParseProvider(tc.http, nil, nil)
			if tc.lint == "" {
				require.NoError(t, err)
				require.NoError(t, newErr)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.lint)
			require.Error(t, newErr, "New refuses what lint refuses")
		})
	}
}

// contract.first_position declares the origin of dense positions: it is
// read as a position of the position_type (a YAML number or a string of
// digits), and refused without dense positions or with a type that has no
// successor arithmetic, at lint and at run.
func TestSpecFirstPosition(t *testing.T) {
	const head = "http:\n  url: http://127.0.0.1:1/items\n  successor: root = this.next\n  contract:\n"
	p := parseProvider(t, head+"    positions: dense\n    first_position: 1\n", nil, nil)
	assert.Equal(t, provider.IntPosition(1), p.Contract().FirstPosition, "a YAML number")
	p = parseProvider(t, head+"    positions: dense\n    first_position: \"0\"\n", nil, nil)
	assert.Equal(t, provider.IntPosition(0), p.Contract().FirstPosition, "origin zero is declared, not absent")
	assert.True(t, p.Contract().HasFirstPosition())
	dec, err := provider.DecimalPosition("49590338271490256608559692538361571095921575989136588898")
	require.NoError(t, err)
	p = parseProvider(t, head+"    positions: dense\n    coordinate: decimal\n    first_position: \"49590338271490256608559692538361571095921575989136588898\"\n", nil, nil)
	assert.Equal(t, dec, p.Contract().FirstPosition, "decimal positions of any length")
	p = parseProvider(t, head+"    positions: dense\n", nil, nil)
	assert.False(t, p.Contract().HasFirstPosition(), "no origin unless declared")

	env := service.GlobalEnvironment().Clone()
	require.NoError(t, env.RegisterInput("tm_lint_origin", service.NewConfigSpec().Field(service.NewObjectField("http", Fields()...).LintRule(ObjectLint())),
		func(*service.ParsedConfig, *service.Resources) (service.Input, error) { return nil, nil }))
	for _, tc := range []struct{ name, contract, lint, run string }{
		{"without dense positions", "    first_position: 1\n", "contract.first_position needs positions: dense", "contract.first_position needs positions: dense"},
		{"over timestamp positions", "    positions: dense\n    coordinate: timestamp\n    first_position: 1\n", "", "needs dense integer or decimal positions, not timestamp"},
		{"not a number", "    positions: dense\n    first_position: one\n", "", `contract.first_position: "one" is not a integer position`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tryParseProvider(head+tc.contract, nil, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.run)
			if tc.lint != "" {
				err := env.NewStreamBuilder().SetYAML("input:\n  tm_lint_origin:\n" + indent(head+tc.contract, "    ") + "\noutput:\n  drop: {}\n")
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.lint)
			}
		})
	}
	require.NoError(t, env.NewStreamBuilder().SetYAML("input:\n  tm_lint_origin:\n"+indent(head+"    positions: dense\n    first_position: 1\n", "    ")+"\noutput:\n  drop: {}\n"), "a declared origin over dense positions lints clean")
}
