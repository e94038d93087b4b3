package e2etest

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Sample is one sample of the Prometheus text format.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Metrics is a scrape's samples by metric name.
type Metrics map[string][]Sample

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// ParseMetrics parses the Prometheus text format.
func ParseMetrics(body string) (Metrics, error) {
	out := Metrics{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("unparsable metrics line %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %v", line, err)
		}
		s := Sample{Labels: map[string]string{}, Value: v}
		for _, lp := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.Labels[lp[1]] = lp[2]
		}
		out[m[1]] = append(out[m[1]], s)
	}
	return out, sc.Err()
}

// Find returns the samples of name whose labels include want.
func (ms Metrics) Find(name string, want map[string]string) []Sample {
	var out []Sample
next:
	for _, s := range ms[name] {
		for k, v := range want {
			if s.Labels[k] != v {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// Scrape GETs url (a /metrics endpoint) and returns the body of a 200.
func Scrape(url string) (string, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: HTTP %d: %s", url, resp.StatusCode, b)
	}
	return string(b), nil
}
