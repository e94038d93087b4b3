package feed

import "testing"

func TestFinalitiesAreTheLatestKnownBasisPerPartition(t *testing.T) {
	scope := "finality-" + t.Name()
	PublishFinality(scope, "a", "append_only_writer assertion")
	PublishFinality(scope, "b", "")
	PublishFinality(scope, "c", "lag 5")
	PublishFinality(scope, "c", "lag 6")
	got := Finalities(scope)
	if len(got) != 2 || got["a"] != "append_only_writer assertion" || got["c"] != "lag 6" {
		t.Fatalf("finalities %v", got)
	}
	got["a"] = "changed"
	if Finalities(scope)["a"] != "append_only_writer assertion" {
		t.Fatal("Finalities returned the feed's own map")
	}
}
