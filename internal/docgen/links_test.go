package docgen_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/docgen"
)

// mdLink matches an inline Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// htmlAnchor matches an explicit anchor: <a id="x"> or <a name="x">.
var htmlAnchor = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)

// slug is GitHub's anchor of a heading: lower case, every character but
// letters, digits, spaces, '-' and '_' dropped, spaces turned into '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// anchors lists the anchors of a Markdown file: its headings' slugs (a
// repeated slug gets -1, -2, … as on GitHub) and explicit <a id> anchors.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimLeft(line, "#")
		if !strings.HasPrefix(text, " ") {
			continue
		}
		s := slug(text)
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// links lists the relative link targets of a Markdown file, outside code
// blocks and code spans.
func links(t *testing.T, path string) []string {
	t.Helper()
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	fenced := false
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		// Drop code spans: a link target inside backticks is text.
		parts := strings.Split(line, "`")
		for i := 0; i < len(parts); i += 2 {
			for _, m := range mdLink.FindAllStringSubmatch(parts[i], -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				out = append(out, target)
			}
		}
	}
	return out
}

// Every relative link of the README and of the hand-written docs names a
// file of the repository, and every anchor a heading (or <a id>) of the
// Markdown page it points to.
func TestHandWrittenDocsLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	pages := []string{"README.md", filepath.Join("docs", "README.md")}
	for _, name := range docgen.HandWritten {
		pages = append(pages, filepath.Join("docs", name))
	}
	checked := 0
	for _, page := range pages {
		path := filepath.Join(root, page)
		for _, target := range links(t, path) {
			file, anchor, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), file)
			}
			_, err := os.Stat(dest)
			if !assert.NoError(t, err, "%s links to %s: no such file", page, target) {
				continue
			}
			checked++
			if anchor != "" && strings.HasSuffix(dest, ".md") {
				assert.True(t, anchors(t, dest)[anchor], "%s links to %s: %s has no heading with anchor #%s", page, target, file, anchor)
			}
		}
	}
	require.Greater(t, checked, 20, "the links are found")
}

func TestSlugIsGitHubsAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"DynamoDB: local servers and real AWS":       "dynamodb-local-servers-and-real-aws",
		"Why is my frontier not advancing?":          "why-is-my-frontier-not-advancing",
		"Probing a source: `connect tidemark probe`": "probing-a-source-connect-tidemark-probe",
		"1. Watch the demo":                          "1-watch-the-demo",
		"Frontier and membership epochs":             "frontier-and-membership-epochs",
	} {
		assert.Equal(t, want, slug(heading), heading)
	}
}
