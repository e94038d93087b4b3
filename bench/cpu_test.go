package bench

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/dynalitetest"
)

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on Linux).
const clockTicks = 100

// cpuSample is a point-in-time reading of CPU time: the whole machine's busy
// time, this process's and dynalite's.
type cpuSample struct {
	at       time.Time
	busy     float64 // seconds, all CPUs
	self     float64
	dynalite float64
}

// cpuUse is the CPU used between two samples, in cores (1 = one core busy
// for the whole interval).
type cpuUse struct {
	Machine, Self, Dynalite, Others float64
}

func (u cpuUse) String() string {
	return fmt.Sprintf("machine %.2f cores: bench %.2f, dynalite %.2f, others %.2f", u.Machine, u.Self, u.Dynalite, u.Others)
}

func sampleCPU() cpuSample {
	return cpuSample{at: time.Now(), busy: machineBusy(), self: procCPU(os.Getpid()), dynalite: procCPU(dynalitePID())}
}

func (s cpuSample) since(base cpuSample) cpuUse {
	d := s.at.Sub(base.at).Seconds()
	if d <= 0 {
		return cpuUse{}
	}
	u := cpuUse{Machine: (s.busy - base.busy) / d, Self: (s.self - base.self) / d, Dynalite: (s.dynalite - base.dynalite) / d}
	u.Others = max(u.Machine-u.Self-u.Dynalite, 0)
	return u
}

// machineBusy is the busy time of all CPUs from /proc/stat, in seconds.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy float64
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest time is already in user
			break
		}
		busy += n
	}
	return busy / clockTicks
}

// procCPU is the user+system time of a process (its waited-for children
// included), in seconds; 0 when unknown.
func procCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // state is field 3; utime 14, stime 15, cutime 16, cstime 17
	var t float64
	for _, k := range []int{11, 12, 13, 14} {
		if k < len(f) {
			n, _ := strconv.ParseFloat(f[k], 64)
			t += n
		}
	}
	return t / clockTicks
}

// ownCPU is the user+system time of this process alone (not of its
// waited-for children), in seconds; 0 when unknown.
func ownCPU() float64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	var t float64
	for _, k := range []int{11, 12} {
		if k < len(f) {
			n, _ := strconv.ParseFloat(f[k], 64)
			t += n
		}
	}
	return t / clockTicks
}

var dynalitePIDCache = map[string]int{}

// dynalitePID finds the dynalite serving TIDEMARK_DYNAMODB_ENDPOINT (the
// node process with "dynalite" and "--port <port>" on its command line).
func dynalitePID() int {
	ep := os.Getenv(dynalitetest.EnvEndpoint)
	if ep == "" {
		return 0
	}
	if pid, ok := dynalitePIDCache[ep]; ok {
		return pid
	}
	u, err := url.Parse(ep)
	if err != nil {
		return 0
	}
	port := u.Port()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		isDynalite := false
		for i, a := range args {
			if strings.Contains(a, "dynalite") {
				isDynalite = true
			}
			if isDynalite && a == "--port" && i+1 < len(args) && args[i+1] == port {
				pid, _ := strconv.Atoi(filepath.Base(d))
				dynalitePIDCache[ep] = pid
				return pid
			}
		}
	}
	dynalitePIDCache[ep] = 0
	return 0
}
