package scale

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// SumMetrics reads a Prometheus text exposition and returns, for each
// wanted metric name, the sum of its samples (every label set; a counter's
// samples may be named with the suffix _total); a name with no sample is
// absent from the map. Other lines are skipped without being
// parsed (an instance's /metrics holds a few series per partition).
func SumMetrics(r io.Reader, names ...string) (map[string]float64, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			continue
		}
		name := line[:end]
		if !want[name] {
			// Prometheus counters carry a _total suffix.
			base, ok := strings.CutSuffix(name, "_total")
			if !ok || !want[base] {
				continue
			}
			name = base
		}
		rest := line[end:]
		if rest[0] == '{' {
			close := strings.LastIndexByte(rest, '}')
			if close < 0 {
				return nil, fmt.Errorf("unparsable metrics line %q", line)
			}
			rest = rest[close+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("metrics line %q has no value", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %v", line, err)
		}
		out[name] += v
	}
	return out, sc.Err()
}

var scrapeClient = &http.Client{Timeout: 10 * time.Second}

// Scrape GETs a /metrics URL and sums the wanted metrics.
func Scrape(ctx context.Context, url string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return SumMetrics(resp.Body, names...)
}

// ProcStat is what /proc says of one process.
type ProcStat struct {
	CPUSeconds float64 // user + system time so far
	RSSBytes   int64   // resident set size now
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// ReadProc reads /proc/<pid>/stat and /proc/<pid>/status.
func ReadProc(pid int) (ProcStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcStat{}, err
	}
	cpu, err := parseStatCPU(string(b))
	if err != nil {
		return ProcStat{}, err
	}
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcStat{}, err
	}
	return ProcStat{CPUSeconds: cpu, RSSBytes: parseStatusRSS(string(s))}, nil
}

// parseStatCPU returns utime+stime of a /proc/<pid>/stat line in seconds
// (fields 14 and 15; the command name in parentheses may hold spaces).
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unparsable /proc stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat %q", stat)
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unparsable /proc stat times %q %q", f[11], f[12])
	}
	return float64(u+s) / clockTicks, nil
}

// parseStatusRSS returns VmRSS of a /proc/<pid>/status in bytes (0 when
// absent).
func parseStatusRSS(status string) int64 {
	for line := range strings.SplitSeq(status, "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// FindDynalite returns the pid of the dynalite-server.js listening on port
// (scripts/with-dynalite starts it with --port), or 0.
func FindDynalite(port string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		isDynalite := false
		for i, a := range args {
			if strings.HasSuffix(a, "dynalite-server.js") {
				isDynalite = true
			}
			if isDynalite && a == "--port" && i+1 < len(args) && args[i+1] == port {
				return pid
			}
		}
	}
	return 0
}

// LoadAvg is /proc/loadavg's first three fields.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
