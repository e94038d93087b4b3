// Command vulngate reads `govulncheck -format json` on stdin and exits 1
// when the code calls a vulnerability that the allow list (its argument)
// does not explain. See package internal/vulngate.
package main

import (
	"fmt"
	"os"

	"github.com/tidemark/tidemark/internal/vulngate"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: govulncheck -format json ./... | vulngate ALLOW_LIST")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	allow, err := vulngate.ParseAllow(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	findings, err := vulngate.Called(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	explained, unexplained, stale := vulngate.Gate(findings, allow)
	for _, e := range explained {
		fmt.Printf("vulncheck: explained: %s: %s\n", e, allow[e.ID])
	}
	for _, id := range stale {
		fmt.Printf("vulncheck: %s is in %s but no longer found: remove it\n", id, os.Args[1])
	}
	for _, u := range unexplained {
		fmt.Printf("vulncheck: UNEXPLAINED: %s\n", u)
	}
	fmt.Printf("vulncheck: %d called vulnerabilities, %d explained, %d unexplained\n", len(findings), len(explained), len(unexplained))
	if len(unexplained) > 0 {
		os.Exit(1)
	}
}
