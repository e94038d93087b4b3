package clustersim

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var flagScaleTable = flag.Bool("scale-table", false, "TestScaleTable: run the scale simulation at full size (-scale-sizes × -scale-instances) and print the table")
var flagScaleSizes = flag.String("scale-sizes", "10000,100000", "TestScaleTable's partition counts")
var flagScaleInstances = flag.String("scale-instances", "3,10", "TestScaleTable's instance counts")
var flagScaleModel = flag.String("scale-model", "dynamodb", "TestScaleTable's store model: dynamodb or dynalite")
var flagScaleSeed = flag.Uint64("scale-seed", 1, "TestScaleTable's seed")

func TestScaleSmoke(t *testing.T) {
	start := time.Now()
	res := RunScale(ScaleConfig{Seed: 1, Partitions: 1000, Instances: 3})
	t.Logf("%s (%d events, %s)", scaleRow(res), res.Events, time.Since(start))
}

func TestScaleTable(t *testing.T) {
	if !*flagScaleTable {
		t.Skip("full-size scale table: -args -scale-table")
	}
	var sizes, insts []int
	for _, f := range strings.Split(*flagScaleSizes, ",") {
		var n int
		fmt.Sscan(f, &n)
		sizes = append(sizes, n)
	}
	for _, f := range strings.Split(*flagScaleInstances, ",") {
		var n int
		fmt.Sscan(f, &n)
		insts = append(insts, n)
	}
	model := DynamoDBModel()
	if *flagScaleModel == "dynalite" {
		model = DynaliteModel()
	}
	for _, p := range sizes {
		for _, n := range insts {
			start := time.Now()
			res := RunScale(ScaleConfig{Seed: *flagScaleSeed, Partitions: p, Instances: n, Model: model})
			t.Logf("%s (%d events, %s)", scaleRow(res), res.Events, time.Since(start))
		}
	}
	_ = slices.Sort[[]int]
	_ = require.True
}
