package e2eops

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/e2etest"
	"github.com/tidemark/tidemark/internal/ops"
	"github.com/tidemark/tidemark/internal/redact"
	"github.com/tidemark/tidemark/internal/redact/redacttest"
)

// The partitions of every scope of the leak test: flaky answers each cursor
// first with 500s (one per encoding echo leads with), malformed first with
// malformed 200s (HTML, no events array, a position that is not an
// integer, an event without id: one per encoding echo leads with); denied
// serves its first page and then refuses the successor for good (403, or
// 401 under OAuth2) and parks, expired answers it with a 410 (an expired
// cursor: parks), and huge hands out a successor over the cursor limit
// (parks). Every failing answer echoes the request.
var (
	leakParts     = []string{"flaky", "malformed", "denied", "expired", "huge"}
	leakDelivered = []string{"flaky", "malformed"}
	leakParked    = []string{"denied", "expired", "huge"}
)

// leakPages is how many pages of leakPageSize events each partition has;
// the cursor after the last one is the head (an empty page, no successor).
const (
	leakPages    = 3
	leakPageSize = 4
)

// leakSecrets are the credentials of one run, each with characters that
// every encoding changes, and random so that a hit is unambiguous.
type leakSecrets struct {
	headerToken, basicUser, basicPass, clientID, clientSecret, accessToken string
	// urlUser and urlPass are the user info of the URL one input reads
	// with (http://user:pass@host/), which net/http sends as Basic.
	urlUser, urlPass string
	// proxyUser and proxyPass are the user info of one input's proxy_url,
	// which net/http sends to the proxy as Proxy-Authorization: Basic.
	proxyUser, proxyPass string
}

func newLeakSecrets() leakSecrets {
	return leakSecrets{
		headerToken:  "HDR-t0ken/" + randHex(12) + "+=",
		basicUser:    "leak-user",
		basicPass:    "b4sic-p@ss/" + randHex(12) + "+=",
		clientID:     "leak-client",
		clientSecret: "cl1ent-s3cret/" + randHex(12) + "+=&",
		accessToken:  "ACCESS-t0ken/" + randHex(12) + "+=",
		urlUser:      "url-user",
		urlPass:      "url-p@ss/" + randHex(12) + "+= :",
		proxyUser:    "proxy-user",
		proxyPass:    "pr0xy-p@ss/" + randHex(12) + "+= :",
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// byName is every secret by the name a failure reports.
func (s leakSecrets) byName() map[string]string {
	return map[string]string{
		"header token":        s.headerToken,
		"basic password":      s.basicPass,
		"basic user:password": s.basicUser + ":" + s.basicPass,
		"client secret":       s.clientSecret,
		// The client-credentials request's Basic header: the URL-escaped
		// id and secret (RFC 6749 §2.3.1).
		"token request basic": base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(s.clientID) + ":" + url.QueryEscape(s.clientSecret))),
		"access token":        s.accessToken,
		"url password":        s.urlPass,
		"url user:password":   s.urlUser + ":" + s.urlPass,
		// The user info as the URL writes it (percent-encoded).
		"url user info":       url.UserPassword(s.urlUser, s.urlPass).String(),
		"proxy password":      s.proxyPass,
		"proxy user:password": s.proxyUser + ":" + s.proxyPass,
		// As proxy_url writes it (percent-encoded).
		"proxy user info": url.UserPassword(s.proxyUser, s.proxyPass).String(),
	}
}

// leakAPI is the fake API: pages at /pages/<scope>/<partition>/<cursor in
// unpadded URL base64>?cursor=<cursor, query-escaped> with the cursor also in the
// JSON body, and an OAuth2 token endpoint at /token.
type leakAPI struct {
	secrets leakSecrets
	// deny is the status each scope refuses denied's successor with.
	deny map[string]int
	// hugeUnit, repeated, is huge's successor: longer than the cursor
	// limit, so that any part of it quoted holds the unit (33 bytes: its
	// base64 repeats too).
	hugeUnit string

	mu       sync.Mutex
	cursors  map[string]string // cursor -> "scope/partition/page"
	byPage   map[string]string // "scope/partition/page" -> cursor
	requests map[string]int    // "scope/partition/cursor" -> requests seen
	answers  map[string]int    // "<scope> <kind>" -> answers given (500, malformed, denied, head, token-500, token)
	echoed   strings.Builder   // every echo served
}

func newLeakAPI(s leakSecrets, deny map[string]int) *leakAPI {
	return &leakAPI{secrets: s, deny: deny, hugeUnit: "HUGE/" + randHex(12) + "+=?&", cursors: map[string]string{}, byPage: map[string]string{},
		requests: map[string]int{}, answers: map[string]int{}}
}

// cursor returns (minting it once) the cursor of page k of scope/part:
// long, random, and with characters that every encoding changes.
func (a *leakAPI) cursor(scope, part string, k int) string {
	id := fmt.Sprintf("%s/%s/%d", scope, part, k)
	if c, ok := a.byPage[id]; ok {
		return c
	}
	// No fixed text but "CUR/": pieces looks for any 16 bytes of it.
	c := fmt.Sprintf("CUR/%s/%d+=?&z", randHex(12), k)
	a.byPage[id], a.cursors[c] = c, id
	return c
}

// handedOut is every cursor the API has given as a successor, by name.
func (a *leakAPI) handedOut() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]string{}
	for c, id := range a.cursors {
		out["cursor "+id] = c
	}
	return out
}

func (a *leakAPI) count(scope, kind string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.answers[scope+" "+kind]
}

// echo is echo, kept in echoed.
func (a *leakAPI) echo(r *http.Request, body string, i int) string {
	e := echo(r, body, i)
	a.mu.Lock()
	a.echoed.WriteString(e)
	a.mu.Unlock()
	return e
}

// echoedText is every echo the API served.
func (a *leakAPI) echoedText() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.echoed.String()
}

// leakEncodings are the encodings an echo quotes a value in; echo leads
// with one of them (the i-th, modulo their number).
var leakEncodings = []func(string) string{
	func(s string) string { return s },
	url.QueryEscape,
	url.PathEscape,
	func(s string) string { j, _ := json.Marshal(s); return string(j[1 : len(j)-1]) },
	func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
	func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) },
	func(s string) string { return base64.RawStdEncoding.EncodeToString([]byte(s)) },
	func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) },
}

// echo renders the request: first each credential and cursor it carries
// (each header value, a credential after its scheme, a Basic credential
// decoded, each query and form parameter, each string of a JSON body), in
// leakEncodings[i], so that they fall within the 256 bytes an error quotes
// of a body once the others are redacted; then the request whole (method,
// URI, path, query, every header, the body) raw, query- and path-escaped
// and JSON-escaped; then every value in every encoding.
func echo(r *http.Request, body string, i int) string {
	var atoms, texts []string
	texts = append(texts, r.Method+" "+r.URL.RequestURI(), r.URL.Path, r.URL.EscapedPath(), r.URL.RawQuery, body)
	names := make([]string, 0, len(r.Header))
	for k := range r.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	// The credentials (Authorization, Proxy-Authorization) first.
	slices.SortStableFunc(names, func(x, y string) int {
		return boolInt(isCredential(y)) - boolInt(isCredential(x))
	})
	var others []string
	for _, k := range names {
		for _, v := range r.Header[k] {
			texts = append(texts, k+": "+v)
			if !isCredential(k) {
				others = append(others, v)
				continue
			}
			atoms = append(atoms, v)
			if scheme, cred, ok := strings.Cut(v, " "); ok {
				atoms = append(atoms, cred)
				if strings.EqualFold(scheme, "basic") {
					if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
						atoms = append(atoms, string(dec))
					}
				}
			}
		}
	}
	for _, vs := range r.URL.Query() {
		atoms = append(atoms, vs...)
	}
	if form, err := url.ParseQuery(body); err == nil && !strings.HasPrefix(body, "{") {
		for _, vs := range form {
			atoms = append(atoms, vs...)
		}
	}
	var doc map[string]any
	if json.Unmarshal([]byte(body), &doc) == nil {
		for _, v := range doc {
			if s, ok := v.(string); ok {
				atoms = append(atoms, s)
			}
		}
	}
	atoms = slices.DeleteFunc(slices.Compact(atoms), func(s string) bool { return s == "" })
	atoms = append(atoms, others...)
	enc := leakEncodings[i%len(leakEncodings)]
	var sb strings.Builder
	for _, s := range atoms {
		sb.WriteString(enc(s) + " ")
	}
	sb.WriteString("\n")
	for _, s := range texts {
		for _, e := range leakEncodings[:4] {
			sb.WriteString("| " + e(s) + " ")
		}
		sb.WriteString("\n")
	}
	for _, s := range atoms {
		for _, e := range leakEncodings {
			sb.WriteString("| " + e(s) + " ")
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// isCredential tells the headers echo decodes: Authorization, and the
// Proxy-Authorization a proxy receives.
func isCredential(header string) bool {
	return header == "Authorization" || header == "Proxy-Authorization"
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (a *leakAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	body := string(b)
	if r.URL.Path == "/token" {
		a.token(w, r, body)
		return
	}
	// /pages/<scope>/<partition>/<cursor>
	rest, ok := strings.CutPrefix(r.URL.Path, "/pages/")
	fields := strings.SplitN(rest, "/", 3)
	if !ok || len(fields) != 3 {
		http.Error(w, "unknown path "+a.echo(r, body, 0), http.StatusNotFound)
		return
	}
	scope, part := fields[0], fields[1]
	cur := r.URL.Query().Get("cursor")

	a.mu.Lock()
	k := 0
	if cur != "" {
		id, known := a.cursors[cur]
		if !known {
			a.mu.Unlock()
			http.Error(w, "unknown cursor "+a.echo(r, body, 0), http.StatusBadRequest)
			return
		}
		_, _ = fmt.Sscanf(id[strings.LastIndex(id, "/")+1:], "%d", &k)
	}
	key := scope + "/" + part + "/" + cur
	a.requests[key]++
	n := a.requests[key]
	kind := ""
	switch {
	case part == "flaky" && n <= len(leakEncodings):
		kind = "500"
	case part == "malformed" && n <= len(leakEncodings):
		kind = "malformed"
	case part == "denied" && k >= 1:
		kind = "denied"
	case part == "expired" && k >= 1:
		kind = "expired"
	case part == "huge":
		kind = "huge"
	case k == leakPages:
		kind = "head"
	}
	a.answers[scope+" "+kind]++
	next := ""
	switch {
	case kind == "huge":
		next = strings.Repeat(a.hugeUnit, (80<<10)/len(a.hugeUnit))
	case kind == "":
		next = a.cursor(scope, part, k+1)
	}
	a.mu.Unlock()

	switch kind {
	case "500":
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "internal error while serving\n"+a.echo(r, body, n-1))
		return
	case "malformed":
		e := a.echo(r, body, n-1)
		switch n % 4 {
		case 1:
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html><body><pre>\n"+e+"</pre></body></html>")
			return
		case 2: // no events array
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"events": e, "next": 7})
		case 3: // a position that is not an integer
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"events": []any{map[string]any{"id": "x", "pos": e}}})
		default: // an event without an id
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"events": []any{map[string]any{"pos": 1, "echo": e}}})
		}
		return
	case "denied":
		w.WriteHeader(a.deny[scope])
		_, _ = io.WriteString(w, "access denied for\n"+a.echo(r, body, n-1))
		return
	case "expired":
		w.WriteHeader(http.StatusGone)
		_, _ = io.WriteString(w, "the continue token has expired\n"+a.echo(r, body, n-1))
		return
	case "head":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"events":[],"next":null}`)
		return
	}
	events := make([]map[string]any, 0, leakPageSize)
	for i := 1; i <= leakPageSize; i++ {
		pos := k*leakPageSize + i
		events = append(events, map[string]any{"id": fmt.Sprintf("%s-%s-%d", scope, part, pos), "pos": pos})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"events": events, "next": next})
}

// token answers the first token requests with a 500 that echoes them (one
// per encoding echo leads with), and every later one with the access
// token, echoing the request in the grant too.
func (a *leakAPI) token(w http.ResponseWriter, r *http.Request, body string) {
	a.mu.Lock()
	a.requests["token"]++
	n := a.requests["token"]
	first := n <= len(leakEncodings)
	if first {
		a.answers["token 500"]++
	} else {
		a.answers["token ok"]++
	}
	a.mu.Unlock()
	if first {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "token endpoint failed on\n"+a.echo(r, body, n-1))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": a.secrets.accessToken, "token_type": "bearer", "expires_in": 3600,
		"request": a.echo(r, body, n-1),
	})
}

// leakProxy is a forward HTTP proxy on loopback in front of a leakAPI: it
// takes requests in absolute form (as net/http sends a plain-HTTP request
// to a proxy) carrying the Proxy-Authorization it expects, and serves them
// with the API, whose echoes then quote that header, raw and decoded. Any
// other request is answered 407, echoing it.
type leakProxy struct {
	api *leakAPI
	// want is the Proxy-Authorization the proxy expects.
	want string

	mu               sync.Mutex
	proxied, refused int
}

func (p *leakProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !r.URL.IsAbs() || r.Header.Get("Proxy-Authorization") != p.want {
		p.mu.Lock()
		p.refused++
		p.mu.Unlock()
		w.Header().Set("Proxy-Authenticate", `Basic realm="leak"`)
		w.WriteHeader(http.StatusProxyAuthRequired)
		_, _ = io.WriteString(w, "proxy authentication required\n"+p.api.echo(r, "", 0))
		return
	}
	p.mu.Lock()
	p.proxied++
	p.mu.Unlock()
	p.api.ServeHTTP(w, r)
}

// counts returns how many requests the proxy forwarded and refused.
func (p *leakProxy) counts() (proxied, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proxied, p.refused
}

// masker replaces every form of every needle in text by <name/encoding>,
// so that a failure message can show text without showing a secret.
func masker(needles map[string]string) func(string) string {
	var pairs []string
	type form struct{ text, label string }
	var forms []form
	for name, v := range needles {
		for enc, f := range redacttest.Encodings(v) {
			forms = append(forms, form{f, "<" + name + "/" + enc + ">"})
		}
		for _, f := range redact.Forms(v) {
			forms = append(forms, form{f, "<" + name + ">"})
		}
	}
	slices.SortStableFunc(forms, func(x, y form) int { return len(y.text) - len(x.text) })
	for _, f := range forms {
		pairs = append(pairs, f.text, f.label)
	}
	r := strings.NewReplacer(pairs...)
	return r.Replace
}

// pieceLen is the length of the pieces of a secret pieces looks for: a
// value cut short (an error quoting the first bytes of a body or a value)
// leaks a piece of a secret that no whole form of it matches.
const pieceLen = 16

// pieces returns "name/encoding" for every secret of which a piece of
// pieceLen bytes of one of its redacttest.Encodings appears in text,
// sorted; nil when none does. It never returns the value.
func pieces(text string, secrets map[string]string) []string {
	index := map[string]string{}
	for name, v := range secrets {
		for enc, f := range redacttest.Encodings(v) {
			for i := 0; i+pieceLen <= len(f); i++ {
				index[f[i:i+pieceLen]] = name + "/" + enc
			}
		}
	}
	found := map[string]bool{}
	for i := 0; i+pieceLen <= len(text); i++ {
		if label, ok := index[text[i:i+pieceLen]]; ok {
			found[label] = true
		}
	}
	out := make([]string, 0, len(found))
	for l := range found {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// scanTable returns every string and binary attribute value of every item
// of the table, read with a raw Scan (not through the store), one per line.
func scanTable(t *testing.T, endpoint, table string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2etest.Patience)
	defer cancel()
	c, err := dynalitetest.Client(ctx, endpoint)
	require.NoError(t, err)
	var sb strings.Builder
	items := 0
	var walk func(av types.AttributeValue)
	walk = func(av types.AttributeValue) {
		switch v := av.(type) {
		case *types.AttributeValueMemberS:
			sb.WriteString(v.Value + "\n")
		case *types.AttributeValueMemberB:
			sb.Write(v.Value)
			sb.WriteString("\n")
		case *types.AttributeValueMemberN:
			sb.WriteString(v.Value + "\n")
		case *types.AttributeValueMemberSS:
			sb.WriteString(strings.Join(v.Value, "\n") + "\n")
		case *types.AttributeValueMemberNS:
			sb.WriteString(strings.Join(v.Value, "\n") + "\n")
		case *types.AttributeValueMemberBS:
			for _, b := range v.Value {
				sb.Write(b)
				sb.WriteString("\n")
			}
		case *types.AttributeValueMemberL:
			for _, e := range v.Value {
				walk(e)
			}
		case *types.AttributeValueMemberM:
			for k, e := range v.Value {
				sb.WriteString(k + "\n")
				walk(e)
			}
		}
	}
	p := dynamodb.NewScanPaginator(c, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		for _, item := range page.Items {
			items++
			for k, av := range item {
				sb.WriteString(k + "\n")
				walk(av)
			}
		}
	}
	return sb.String(), items
}

// TestNoSecretOrCursorLeavesTheProcessInAnyEncoding runs the binary at
// TRACE against a fake API that echoes every request it fails (headers,
// body, path and query, each credential and cursor also on its own, in
// every encoding, the leading one rotating so that each lands in the 256
// bytes an error quotes) in 500, 401, 403, 410 and malformed 2xx answers,
// and a token endpoint that echoes its request in 500s and in its grant.
// Five inputs read it: one with a bearer token in `headers`, one with
// `basic_auth`, one with OAuth2 client credentials, one with credentials in
// its URL's user info (which net/http sends as Basic), and one through a
// loopback proxy named by a `proxy_url` with user info (which net/http
// sends to the proxy as Proxy-Authorization; the proxy's refusal of that
// input's denied partition is a 407); in each, one partition is retried
// past 500s, one past malformed pages, and three park (a permanent
// refusal, an expired cursor, a successor over the cursor limit). Once
// every page is delivered and those partitions parked, the denied
// partition of every scope is unparked (`tidemark unpark`, with the
// cursor key: its audit entry records the park reason it cleared) and
// parks again, and `tidemark probe` reads the user-info and proxy scopes.
// Then no credential and no cursor the fake handed out appears, raw,
// URL-escaped (query, path, strict percent-encoding, lower-case escapes),
// in base64 (standard and URL, padded and not) or JSON-escaped, nor any
// 16-byte piece of one, in the process's output, `tidemark status` (text
// and JSON, with the repairs), the output of `unpark` and `probe`, a
// /metrics scrape, or any attribute of any item of the DynamoDB table
// (cursors are encrypted at rest; the audit entries are in the
// checkpoints). A failure names the source, the secret and the encoding,
// never the value.
func TestNoSecretOrCursorLeavesTheProcessInAnyEncoding(t *testing.T) {
	e := newEnv(t)
	sec := newLeakSecrets()
	scopes := map[string]string{"bearer": "leak-bearer", "basic": "leak-basic", "oauth": "leak-oauth", "userinfo": "leak-userinfo", "proxy": "leak-proxy"}
	api := newLeakAPI(sec, map[string]int{scopes["bearer"]: 403, scopes["basic"]: 403, scopes["oauth"]: 401, scopes["userinfo"]: 401, scopes["proxy"]: 407})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	proxy := &leakProxy{api: api, want: "Basic " + base64.StdEncoding.EncodeToString([]byte(sec.proxyUser+":"+sec.proxyPass))}
	proxySrv := httptest.NewServer(proxy)
	t.Cleanup(proxySrv.Close)
	cursorKey := base64.StdEncoding.EncodeToString([]byte(randHex(16)))
	secretEnv := []string{
		"LEAK_HEADER_TOKEN=" + sec.headerToken,
		"LEAK_BASIC_USER=" + sec.basicUser,
		"LEAK_BASIC_PASS=" + sec.basicPass,
		"LEAK_CLIENT_SECRET=" + sec.clientSecret,
		"LEAK_URL_USERINFO=" + url.UserPassword(sec.urlUser, sec.urlPass).String(),
		"LEAK_PROXY_USERINFO=" + url.UserPassword(sec.proxyUser, sec.proxyPass).String(),
		"LEAK_CURSOR_KEY=" + cursorKey,
	}

	input := func(scope, base, auth string) string {
		return fmt.Sprintf(`
      - paginated_partitions:
          scope: %s
          partitions: [ %s ]
          poll_interval: 50ms
          park_check_interval: 200ms
          store_backoff: 50ms
          fetch_retries: 10
          fetch_backoff: 1ms
          checkpoint:
            backend: dynamodb
            dynamodb: { table: %q, endpoint: %q }
            cursor_encryption:
              keys: [ { id: k1, env: LEAK_CURSOR_KEY } ]
          http:
            url: '%s/pages/%s/${! @partition }/${! @cursor.encode("base64rawurl") }?cursor=${! @cursor.escape_url_query() }'
            verb: POST
            body: '${! {"cursor": @cursor}.format_json(no_indent: true) }'
            timeout: 10s
            max_retries: 2
            backoff: { initial_interval: 1ms, max_interval: 5ms }
%s
            events: root = this.events
            event_position: root = this.pos
            successor: root = this.next
            contract:
              positions: dense
              recovery: park
`, scope, strings.Join(leakParts, ", "), e.table, e.endpoint, base, scope, auth)
	}
	port := e2etest.FreePort(t)
	// Credentials in the URL's user info, from the environment.
	userinfoInput := input(scopes["userinfo"], "http://${LEAK_URL_USERINFO}@"+strings.TrimPrefix(srv.URL, "http://"), "")
	// Through the proxy, whose user info is from the environment: the page
	// URL names the discard port, which is never dialled (net/http sends
	// every request to the proxy, which serves it with the fake).
	proxyInput := input(scopes["proxy"], "http://127.0.0.1:9",
		fmt.Sprintf(`            proxy_url: 'http://${LEAK_PROXY_USERINFO}@%s'`, strings.TrimPrefix(proxySrv.URL, "http://")))
	config := fmt.Sprintf(`
http: { address: 127.0.0.1:%d }
metrics: { prometheus: {} }
logger: { level: TRACE }
input:
  broker:
    inputs:%s%s%s%s%s
output:
  drop: {}
`, port,
		input(scopes["bearer"], srv.URL, `            headers: { Authorization: 'Bearer ${LEAK_HEADER_TOKEN}' }`),
		input(scopes["basic"], srv.URL, `            basic_auth: { enabled: true, username: '${LEAK_BASIC_USER}', password: '${LEAK_BASIC_PASS}' }`),
		input(scopes["oauth"], srv.URL, fmt.Sprintf(`            oauth2: { enabled: true, client_key: %q, client_secret: '${LEAK_CLIENT_SECRET}', token_url: '%s/token' }`, sec.clientID, srv.URL)),
		userinfoInput,
		proxyInput,
	)

	// The process's output goes to out, not to the Proc's buffer, which
	// e2etest prints unmasked when the test fails.
	out := &e2etest.SyncBuffer{}
	cfgPath := filepath.Join(e.dir, "leak.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(config), 0o600))
	cmd := exec.Command(e.bin, "run", cfgPath)
	cmd.Dir = e.dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = e2etest.Env(secretEnv...)
	p := e2etest.Start(t, "connect run leak", cmd)
	t.Cleanup(func() { p.Stop(stopGrace) })

	needles := func() map[string]string {
		n := sec.byName()
		n["huge successor"] = api.hugeUnit
		for k, v := range api.handedOut() {
			n[k] = v
		}
		return n
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- connect run output (secrets and cursors masked), last 80 lines ---\n%s", masker(needles())(out.Tail(80)))
		}
	})

	// Wait for every page of flaky and malformed delivered (applied
	// through the last position) and the others parked, in every scope.
	statusText := map[string]string{}
	statusJSON := map[string]string{}
	last := leakPages * leakPageSize
	waitFor(t, p, "flaky and malformed applied through the last position and denied, expired and huge parked, in every scope", func() (bool, string) {
		var state []string
		done := true
		for _, scope := range scopes {
			res, code := e.cli("", "status", "--scope", scope, "--json")
			if code != 0 {
				return false, masker(needles())(res)
			}
			var s ops.Status
			if err := json.Unmarshal([]byte(jsonPart(res)), &s); err != nil {
				return false, err.Error()
			}
			got := map[string]ops.PartitionStatus{}
			for _, ps := range s.Partitions {
				got[ps.Partition] = ps
			}
			for _, part := range leakDelivered {
				if got[part].Applied != fmt.Sprint(last) || got[part].Parked != "" {
					done = false
				}
			}
			for _, part := range leakParked {
				if got[part].Parked == "" {
					done = false
				}
			}
			statusJSON[scope] = res
			for _, part := range leakParts {
				state = append(state, fmt.Sprintf("%s/%s applied %q parked %q", scope, part, got[part].Applied, got[part].Parked))
			}
		}
		return done, masker(needles())(strings.Join(state, "; "))
	})
	// Each partition at the head has been polled past its last page.
	waitFor(t, p, "the head polled in every scope", func() (bool, string) {
		for _, scope := range scopes {
			if api.count(scope, "head") < 4 {
				return false, scope + " head polls: " + fmt.Sprint(api.count(scope, "head"))
			}
		}
		return true, ""
	})

	// The failures happened: every scope answered 500s, malformed pages and
	// refusals, and the token endpoint a 500.
	for _, scope := range scopes {
		for _, kind := range []string{"500", "malformed", "denied", "expired", "huge"} {
			assert.Positive(t, api.count(scope, kind), "%s answered %s", scope, kind)
		}
	}
	assert.Positive(t, api.count("token", "500"), "the token endpoint failed once")
	assert.Positive(t, api.count("token", "ok"), "the token endpoint granted a token")
	proxied, refused := proxy.counts()
	assert.Positive(t, proxied, "the proxy scope's requests went through the proxy")
	assert.Zero(t, refused, "every request the proxy received carried its Proxy-Authorization")

	statusOf := func(scope string) (ops.Status, error) {
		res, code := e.cli("", "status", "--scope", scope, "--json")
		if code != 0 {
			return ops.Status{}, fmt.Errorf("status --scope %s --json exited %d:\n%s", scope, code, masker(needles())(res))
		}
		var s ops.Status
		return s, json.Unmarshal([]byte(jsonPart(res)), &s)
	}
	// Unpark denied in every scope, with the cursor key as an operator of
	// an encrypted scope would: its audit entry keeps the park reason it
	// cleared, which quoted the echoed refusal. The input reads denied
	// again, is refused again and parks it again.
	var unparkOut strings.Builder
	deniedBefore := map[string]int{}
	for _, scope := range scopes {
		deniedBefore[scope] = api.count(scope, "denied")
		res, code := e.cliEnv([]string{"LEAK_CURSOR_KEY=" + cursorKey}, "", "unpark", "--scope", scope, "--partition", "denied", "--yes",
			"--cursor-key", "k1=env:LEAK_CURSOR_KEY")
		require.Equal(t, 0, code, "unpark --scope %s failed:\n%s", scope, masker(needles())(res))
		unparkOut.WriteString(res)
	}
	waitFor(t, p, "denied unparked, refused again and parked again, in every scope", func() (bool, string) {
		for _, scope := range scopes {
			s, err := statusOf(scope)
			if err != nil {
				return false, err.Error()
			}
			ps := partitionOf(t, s, "denied")
			if ps.Parked == "" || api.count(scope, "denied") <= deniedBefore[scope] {
				return false, scope + ": denied not parked again yet"
			}
		}
		return true, ""
	})
	for _, scope := range scopes {
		s, err := statusOf(scope)
		require.NoError(t, err)
		ps := partitionOf(t, s, "denied")
		require.Len(t, ps.Repairs, 1, "%s: denied has the unpark's audit entry", scope)
		assert.Contains(t, ps.Repairs[0].Command, "unpark", scope)
		assert.NotEmpty(t, ps.Repairs[0].Previous["parked"], "%s: the audit entry keeps the park reason it cleared", scope)
	}

	// The probe reads the user-info and proxy scopes' configs (each its
	// input alone): its output quotes the echoed refusals, redacted.
	probeOut := map[string]string{}
	for scope, in := range map[string]string{scopes["userinfo"]: userinfoInput, scopes["proxy"]: proxyInput} {
		path := filepath.Join(e.dir, scope+"-probe.yaml")
		require.NoError(t, os.WriteFile(path, []byte(strings.Replace(in, "      - paginated_partitions:", "input:\n  paginated_partitions:", 1)), 0o600))
		cmd := exec.Command(e.bin, "tidemark", "probe", path, "--pages", "3")
		cmd.Dir = e.dir
		cmd.Env = e2etest.Env(secretEnv...)
		probeOut[scope] = e2etest.Run(t, e2etest.Patience, cmd).Output
		assert.Contains(t, probeOut[scope], redact.Mask, "%s: the probe quotes the echoed refusal, redacted", scope)
	}
	assert.Contains(t, probeOut[scopes["userinfo"]], "HTTP 401")
	assert.Contains(t, probeOut[scopes["proxy"]], "HTTP 407")
	proxiedAfter, refused := proxy.counts()
	assert.Greater(t, proxiedAfter, proxied, "the probe's requests went through the proxy")
	assert.Zero(t, refused, "every request the proxy received carried its Proxy-Authorization")

	metrics, err := e2etest.Scrape(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	require.NoError(t, err)
	for _, scope := range scopes {
		res, code := e.cli("", "status", "--scope", scope)
		require.Equal(t, 0, code, "status --scope %s failed:\n%s", scope, masker(needles())(res))
		statusText[scope] = res
		res, code = e.cli("", "status", "--scope", scope, "--json")
		require.Equal(t, 0, code, "status --scope %s --json failed:\n%s", scope, masker(needles())(res))
		statusJSON[scope] = res
		var s ops.Status
		require.NoError(t, json.Unmarshal([]byte(jsonPart(res)), &s))
		// Read without --cursor-key, status names the key the scope's
		// cursors are stored under, and what an input without it does.
		assert.Equal(t, []string{"k1"}, s.CursorKeyIDs, scope)
		assert.Contains(t, statusText[scope], "cursors of scope "+scope+" are stored encrypted under key id(s) k1: an input of the scope needs checkpoint.cursor_encryption with these ids (without, it refuses to start)")
		for _, ps := range s.Partitions {
			if ps.Partition == "denied" || ps.Partition == "expired" {
				assert.Contains(t, ps.Parked, redact.Mask, "%s: the park reason quotes the echoed refusal, redacted", scope)
			}
		}
	}
	// Stop the process, so that its output is complete.
	require.True(t, p.Stop(stopGrace), "connect run shuts down on SIGTERM")
	table, items := scanTable(t, e.endpoint, e.table)
	require.Positive(t, items, "the table holds checkpoints and witnesses")

	logs := out.String()
	t.Logf("scanned: %d bytes of output (%d lines, %d at TRACE, %d WARN, %d ERROR, %d %s), %d bytes of /metrics, %d items (%d bytes) of the table, %d status outputs; %d needles",
		len(logs), strings.Count(logs, "\n"), strings.Count(logs, "level=trace"), strings.Count(logs, "level=warning"), strings.Count(logs, "level=error"),
		strings.Count(logs, redact.Mask), redact.Mask, len(metrics), items, len(table), 2*len(scopes), len(needles()))
	assert.Contains(t, logs, redact.Mask, "the echoed requests were quoted in the log, redacted")
	assert.Contains(t, logs, `level=trace`, "the log is at TRACE")

	secrets := needles()
	// flaky and malformed were handed every successor, denied and expired
	// their first (never print the map: it holds the values).
	require.Equal(t, len(scopes)*(2*leakPages+2), len(api.handedOut()), "every successor was handed out")
	// The needles are right: each was sent to the fake and echoed.
	echoed := api.echoedText()
	for name, v := range secrets {
		if name == "huge successor" || name == "url user info" || name == "proxy user info" {
			continue // refused, never sent back; sent only decoded
		}
		assert.NotEmpty(t, redacttest.Leaks(echoed, map[string]string{name: v}), "the fake echoed %s", name)
	}
	sources := []struct{ name, text string }{
		{"connect run stdout+stderr", logs},
		{"/metrics", metrics},
		{"dynamodb scan", table},
		{"unpark", unparkOut.String()},
	}
	for _, scope := range []string{scopes["bearer"], scopes["basic"], scopes["oauth"], scopes["userinfo"], scopes["proxy"]} {
		sources = append(sources,
			struct{ name, text string }{"status --scope " + scope, statusText[scope]},
			struct{ name, text string }{"status --scope " + scope + " --json", statusJSON[scope]})
	}
	for _, scope := range []string{scopes["userinfo"], scopes["proxy"]} {
		sources = append(sources, struct{ name, text string }{"probe of " + scope, probeOut[scope]})
	}
	for _, src := range sources {
		require.NotEmpty(t, src.text, src.name)
		// Leaks names the secret and the encoding, never the value.
		assert.Empty(t, redacttest.Leaks(src.text, secrets), "secrets or cursors found in %s", src.name)
		assert.Empty(t, pieces(src.text, secrets), "%d-byte pieces of secrets or cursors found in %s", pieceLen, src.name)
	}
}
