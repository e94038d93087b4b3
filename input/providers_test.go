package input

import (
	// The input imports no provider: its tests link in both of the
	// module's (their config objects come from the registry).
	_ "github.com/tidemark/tidemark/provider/httpprovider"
	_ "github.com/tidemark/tidemark/provider/simulated"
)
