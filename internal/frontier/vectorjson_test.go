package frontier

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tidemark/tidemark/internal/coord"
)

func TestVectorJSON(t *testing.T) {
	got := VectorJSON(map[string]coord.Watermark{
		"z": coord.String("2026-01-01"), "a": coord.Integer(-3), "m": {}, `q"uote`: coord.Integer(1),
	})
	require.Equal(t, `{"a":-3,"m":null,"q\"uote":1,"z":"2026-01-01"}`, got)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(got), &v))
	require.Equal(t, "{}", VectorJSON(nil))
}
