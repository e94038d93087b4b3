// Package sdkcoord converts between the provider SDK's coordinates
// (provider.Position, provider.Watermark, provider.Kind) and the core's
// (internal/coord), value for value, at the boundary where a provider's
// values enter the core (reconcile.FromProvider) and the core's leave for a
// provider (a request's watermark, a restart's boundary). The two kinds
// share their numbering and both hold integers and timestamps in Int and
// strings and canonical decimals in Str, so a conversion copies fields and
// never fails; a round trip returns the value it started from.
package sdkcoord

import (
	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/provider"
)

// Kind is the core's kind of an SDK kind.
func Kind(k provider.Kind) coord.Kind { return coord.Kind(k) }

// SDKKind is the SDK's kind of a core kind.
func SDKKind(k coord.Kind) provider.Kind { return provider.Kind(k) }

// Position is the core's position of an SDK position.
func Position(p provider.Position) coord.Position {
	return coord.Position{Kind: coord.Kind(p.Kind), Int: p.Int, Str: p.Str}
}

// SDKPosition is the SDK's position of a core position.
func SDKPosition(p coord.Position) provider.Position {
	return provider.Position{Kind: provider.Kind(p.Kind), Int: p.Int, Str: p.Str}
}

// Watermark is the core's watermark of an SDK watermark.
func Watermark(w provider.Watermark) coord.Watermark {
	return coord.Watermark{Kind: coord.Kind(w.Kind), Int: w.Int, Str: w.Str}
}

// SDKWatermark is the SDK's watermark of a core watermark.
func SDKWatermark(w coord.Watermark) provider.Watermark {
	return provider.Watermark{Kind: provider.Kind(w.Kind), Int: w.Int, Str: w.Str}
}
