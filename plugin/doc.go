// Package plugin registers every tidemark component with the Benthos
// environment. Import it for its side effects:
//
//	import _ "github.com/tidemark/tidemark/plugin"
//
// It is the one package the custom binary under cmd/connect imports.
package plugin
