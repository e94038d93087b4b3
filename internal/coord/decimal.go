package coord

import (
	"fmt"
	"strings"
)

// canonicalDecimal checks that s is an unsigned decimal integer (surrounding
// spaces allowed) and returns it without leading zeros.
func canonicalDecimal(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("coord: decimal %q has no digits", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return "", fmt.Errorf("coord: decimal %q: %q is not a digit (want an unsigned integer of any length)", s, s[i])
		}
	}
	t := strings.TrimLeft(s, "0")
	if t == "" {
		return "0", nil
	}
	return t, nil
}

// compareDecimal orders canonical decimals: a longer one is greater, equal
// lengths compare digit by digit.
func compareDecimal(a, b string) int {
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return strings.Compare(a, b)
}

// incDecimal returns the canonical decimal d+1.
func incDecimal(d string) string {
	b := []byte(d)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < '9' {
			b[i]++
			return string(b)
		}
		b[i] = '0'
	}
	return "1" + string(b)
}

// decDecimal returns the canonical decimal d-1; d must not be "0".
func decDecimal(d string) string {
	b := []byte(d)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] > '0' {
			b[i]--
			break
		}
		b[i] = '9'
	}
	if len(b) > 1 && b[0] == '0' {
		b = b[1:]
	}
	return string(b)
}
