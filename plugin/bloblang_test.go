package plugin

import (
	"testing"

	"github.com/redpanda-data/benthos/v4/public/bloblang"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The XML method is registered under tidemark's own name only: a program
// that also links Redpanda Connect keeps its parse_xml (Benthos keeps the
// last registration of a name without error).
func TestXMLMethodHasTidemarksName(t *testing.T) {
	env := bloblang.GlobalEnvironment()
	exe, err := env.Parse(`root = this.doc.tidemark_parse_xml(cast: true).a`)
	require.NoError(t, err)
	got, err := exe.Query(map[string]any{"doc": `<a><b>1</b><b>2</b></a>`})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"b": []any{1.0, 2.0}}, got)
	_, err = exe.Query(map[string]any{"doc": `<a/><trailing/>`})
	assert.Error(t, err, "one document only")

	_, err = env.Parse(`root = this.doc.parse_xml()`)
	assert.Error(t, err, "plugin registers no parse_xml")
}
