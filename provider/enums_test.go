package provider

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// enumCase checks one enumeration: every listed value has a name that
// parses back to it, the list holds every named value (the first value
// after the list's last has no name), and an unknown name is refused.
func enumCase[E interface {
	~uint8
	fmt.Stringer
}](t *testing.T, values []E, parse func(string) (E, error), unnamed string) {
	t.Helper()
	require.NotEmpty(t, values)
	seen := map[string]bool{}
	for _, v := range values {
		name := v.String()
		require.NotContains(t, name, "(", "value %d has no name", uint8(v))
		require.False(t, seen[name], "two values named %s", name)
		seen[name] = true
		back, err := parse(name)
		require.NoError(t, err)
		require.Equal(t, v, back)
	}
	next := values[len(values)-1] + 1
	require.True(t, strings.HasPrefix(next.String(), unnamed+"("), "%s is named %q but not listed", unnamed, next.String())
	_, err := parse("no_such_value")
	require.ErrorIs(t, err, ErrInvalidContract)
	require.ErrorContains(t, err, strings.Join(Names(values), ", "))
}

// Each contract enumeration is listed whole and parses from its names:
// a config value becomes its typed value once, at the edge.
func TestContractEnumerationsParseFromTheirNames(t *testing.T) {
	t.Run("empty_page", func(t *testing.T) { enumCase(t, EmptyPages(), ParseEmptyPage, "empty_page") })
	t.Run("missing_successor", func(t *testing.T) { enumCase(t, MissingSuccessors(), ParseMissingSuccessor, "missing_successor") })
	t.Run("recovery", func(t *testing.T) { enumCase(t, Recoveries(), ParseRecovery, "recovery") })
	t.Run("finality", func(t *testing.T) { enumCase(t, Finalities(), ParseFinality, "finality") })
	t.Run("pagination", func(t *testing.T) { enumCase(t, Paginations(), ParsePagination, "pagination") })
}
