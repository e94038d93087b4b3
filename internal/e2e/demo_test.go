//go:build unix

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/e2etest"
)

// demoEnv is the test's environment without the variables that would send
// the demo to a DynamoDB endpoint: `make run` on a machine with nothing but
// Go.
func demoEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "TIDEMARK_DYNAMODB_ENDPOINT", "TIDEMARK_DEMO_BACKEND":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// What `make run` runs (scripts/demo over config/examples/demo.yaml) needs
// no outside service: no DynamoDB endpoint is set, yet every partition
// completes and the script exits 0. The downstream failures the demo causes
// on purpose are announced as such, each one nacks its page (the input
// fetches it again), and none is logged at error level.
func TestDemoRunsWithoutOutsideServicesAndAnnouncesItsFailures(t *testing.T) {
	bin := e2etest.Connect(t)
	root := e2etest.ModuleRoot(t)
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "demo"), bin)
	cmd.Dir = root
	cmd.Env = demoEnv()
	res := e2etest.Run(t, e2etest.Patience, cmd)
	require.Equal(t, 0, res.Code, "demo exit code; output:\n%s", e2etest.Tail(res.Output, 40))

	out := res.Output
	assert.Contains(t, out, "checkpoints in memory", "the demo says where its checkpoints are")
	for _, p := range []string{"orders", "payments", "refunds", "audit"} {
		// Caught up, not durably complete: the simulated source never ends
		// a partition, so the next run reads on from its cursor.
		assert.Regexp(t, `Partition `+p+` is caught up \([^)]*not marked complete[^)]*\), complete through 2000`, out, "partition %s is caught up through 2000", p)
	}
	assert.Contains(t, out, "Scope demo is complete through 2000 (epoch 1)")
	// The frontier a page's line shows is the one published when the page
	// passed: on a loaded machine the last partition's pages may all pass
	// before the first publication ("none").
	assert.Regexp(t, `(?m)^audit +page ending at 2000 +generation 20 +\S+ +frontier (\d+|none) +held by `, out,
		"one line per page with its generation, retry class and the combined frontier")

	assert.NotContains(t, out, "level=error", "no error is logged: the demo's failures are deliberate")
	assert.NotContains(t, out, "Failed to send message", "no output logs a failure")

	announced := regexp.MustCompile(`demo: failing delivery of (\w+) page ending at \d+ \(generation (\d+)\) on purpose`).FindAllStringSubmatch(out, -1)
	require.NotEmpty(t, announced, "the demo announces its deliberate failures")
	nacked := func(partition, generation string) bool {
		return strings.Contains(out, "Partition "+partition+": delivery of generation "+generation+" events ")
	}
	superseded := 0
	for _, a := range announced {
		partition, generation := a[1], a[2]
		if !nacked(partition, generation) {
			// Two pages of one partition refused while both were in flight:
			// the earlier one's nack sends the chain back to its generation
			// and the later page's emission is dropped, so its own refusal
			// nacks nothing. An earlier refused generation of the partition
			// must then have been nacked.
			g, _ := strconv.Atoi(generation)
			earlier := false
			for _, b := range announced {
				if h, _ := strconv.Atoi(b[2]); b[1] == partition && h < g && nacked(partition, b[2]) {
					earlier = true
				}
			}
			assert.True(t, earlier, "the announced failure of %s generation %s nacks its page (or an earlier refused page of %s superseded it)", partition, generation, partition)
			superseded++
			continue
		}
		// The nacked page is fetched again, or the chain went back further:
		// an earlier refused page of the partition, in flight at the same
		// time (their witnesses written together, both delivered at
		// once), was nacked too and the chain restarts at the head.
		again := func(g string) bool {
			return regexp.MustCompile(`Partition ` + partition + ` re-fetching cursor \S+ at generation ` + g + ` after a failed delivery`).MatchString(out)
		}
		refetched := again(generation)
		g, _ := strconv.Atoi(generation)
		for _, b := range announced {
			if h, _ := strconv.Atoi(b[2]); b[1] == partition && h < g && nacked(partition, b[2]) && again(b[2]) {
				refetched = true
			}
		}
		assert.True(t, refetched, "the nacked page of %s generation %s is fetched again (or an earlier nacked page of %s is)", partition, generation, partition)
	}
	// Every failed delivery is one the demo caused on purpose.
	failed := regexp.MustCompile(`delivery of generation \d+ events \S+ failed, the page will be fetched again: (.*?)"`).FindAllStringSubmatch(out, -1)
	assert.Len(t, failed, len(announced)-superseded, "one failed delivery per announcement whose page was still current")
	for _, f := range failed {
		assert.Contains(t, f[1], "on purpose", "a failed delivery the demo did not announce: %s", f[1])
	}
	// A refetched page is classified against its witness, not delivered as a first response.
	assert.Regexp(t, `(?m)^\w+ +page ending at +\d+ +generation +\d+ +(exact_replay|token_rotation|shifted_page) `, out)
}
