package clustersim

import (
	"math"

	"github.com/tidemark/tidemark/internal/chain"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider"
)

// The broken variants of the lanes are applied to the real machine: to its
// configuration (configure) or to the store calls it asks for (rewrite).
// The store's own variants (UnconditionalWrite, IgnoreLease) wrap the store
// (faults.go, lease.go); MaxFrontier breaks the publisher.

// configure changes the machine's configuration for the variant:
// BareEmptyPage declares every empty page the end of the data;
// ParkOnMalformed gives a malformed answer no retry, RetryMalformedForever
// endless ones;
// SelfCertifiedWatermark reads finality none as source;
// AnyWatermarkCovers classifies as usual, then calls a divergent response
// that carries any complete-through watermark a shifted page, as if a
// watermark covered every position, also the ones above it;
// IgnoreOffsetOverlap reads an offset partition's overlap check as
// offset_unproven (no check); AcceptOffsetShaped reads an ordered token
// contract as keyset, which the offset_shaped_successor monitor exempts;
// TrustFirstPage drops the declared origin of dense positions (the first
// page of a traversal goes unchecked).
func (v Variant) configure(cfg *chain.Config) {
	switch v {
	case IgnoreIncarnation:
		cfg.IgnoreIncarnation = true
	case EmitBeforeIncarnationCheck:
		// The previous release's order: each page's events right after
		// its own witness write (witnesses written alone: a group's wait
		// for the page behind moves the emission later, past most
		// recreations the check would have caught).
		cfg.EmitBeforeCheck = true
		cfg.WitnessGroupPages = 1
	case SkipRereadReceipts:
		cfg.SkipRereadReceipts = true
	case BareEmptyPage:
		cfg.Contract.EmptyPage = provider.EmptyEndOfData
	case ParkOnMalformed:
		cfg.FetchRetries = 0
	case RetryMalformedForever:
		cfg.FetchRetries = math.MaxInt32
	case SelfCertifiedWatermark:
		if cfg.Contract.Finality <= provider.FinalityNone {
			cfg.Contract.Finality = provider.FinalitySource
		}
	case AcceptOffsetShaped:
		if cfg.Contract.Pagination == provider.PaginationToken && cfg.Contract.Ordered() {
			cfg.Contract.Pagination = provider.PaginationKeyset
		}
	case TrustFirstPage:
		cfg.Contract.FirstPosition = provider.Position{}
	case IgnoreOffsetOverlap:
		if cfg.Contract.OffsetOverlap {
			cfg.Contract.OffsetOverlap, cfg.Contract.OffsetUnproven = false, true
		}
	case AnyWatermarkCovers:
		cfg.Classify = func(in reconcile.ClassifyInput) (reconcile.Verdict, error) {
			v, err := reconcile.Classify(in)
			if err == nil && v.Class == reconcile.UnprovableDivergence && !in.Witness.CompleteThrough.IsZero() {
				v.Class, v.Attempt, v.Resume = reconcile.ShiftedPage, in.Witness.AttemptID, nil
				v.Reason = "variant: its complete-through watermark " + in.Witness.CompleteThrough.String() + " counts as coverage of " + v.Reason
			}
			return v, err
		}
	}
}

// rewrite changes a store call the machine asked for: under
// PromoteOtherSuccessor a page's promotion (and its resolution) writes the
// successor of another response to the same (cursor, generation) when the
// lane knows one, with the completion evidence of its own.
func (v Variant) rewrite(l *lane, a chain.Action) chain.Action {
	if v == CoalescedWatermarkDropped {
		return dropCoalescedWatermark(l, a)
	}
	if v != PromoteOtherSuccessor {
		return a
	}
	switch x := a.(type) {
	case chain.Promote:
		if x.Restart {
			return a
		}
		if to, other, ok := l.otherSuccessor(x.Promotion); ok {
			l.note("variant: promoting the successor of %s with the evidence of %s", other, x.Promotion.WitnessID)
			x.Promotion.To = to
			return x
		}
	case chain.Resolve:
		if to, _, ok := l.otherSuccessor(x.Promotion); ok {
			x.Promotion.To = to
			return x
		}
	}
	return a
}

// dropCoalescedWatermark is CoalescedWatermarkDropped: a promotion (or its
// resolution) of several pages states the watermark the stored checkpoint
// holds instead of the one its pages reached.
func dropCoalescedWatermark(l *lane, a chain.Action) chain.Action {
	drop := func(p *store.Promotion) {
		if p.Pages < 2 {
			return
		}
		if cp, err := l.s.mem.LoadCheckpoint(bg, l.key); err == nil {
			p.Watermark, p.Finality = cp.Watermark, cp.Finality
		}
	}
	switch x := a.(type) {
	case chain.Promote:
		if !x.Restart {
			drop(&x.Promotion)
		}
		return x
	case chain.Resolve:
		drop(&x.Promotion)
		return x
	}
	return a
}

// asked sees a store call when the lane's machine asks for it: under
// PublishBeforePromotion a promotion's watermark goes to every publisher's
// feed then, before the promotion is sent (the input's feed is its
// successful promotions, and the simulator's the durable checkpoints).
func (v Variant) asked(l *lane, a chain.Action) {
	if v != PublishBeforePromotion {
		return
	}
	if x, ok := a.(chain.Promote); ok && !x.Restart && !x.Promotion.Watermark.IsZero() {
		for _, p := range l.s.publishers {
			if p.pub != nil {
				p.pub.Observe(l.p.name, x.Promotion.Watermark)
			}
		}
	}
}
