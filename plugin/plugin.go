package plugin

import (
	// The tidemark_dynamodb cache.
	_ "github.com/tidemark/tidemark/cache"
	// The paginated_partitions input.
	_ "github.com/tidemark/tidemark/input"
	// The frontier_advances input.
	_ "github.com/tidemark/tidemark/frontieradvances"
	// The partition_frontier processor.
	_ "github.com/tidemark/tidemark/processor"

	// The providers of the paginated_partitions input: each registers its
	// config object with package provider (docs/providers.md).
	_ "github.com/tidemark/tidemark/provider/httpprovider"
	_ "github.com/tidemark/tidemark/provider/simulated"
)
