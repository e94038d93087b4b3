package dynamostore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
)

// Group commit of witnesses (docs/design.md#write-units-per-page). A group
// is one item: its first witness's own item, exactly as PutWitness writes
// it (so everything that reads or updates one witness item reads and
// updates the first witness of a group unchanged), plus
//
//	gv   N   the group layout's version (1)
//	lg   N   the last generation of the group (pruning keeps the item while it is needed)
//	grp  L   the other witnesses, each an M of the witness attributes plus
//	         g (N, generation) and a (S, attempt id: the part after the
//	         ap (N) bytes it shares with the first witness's), without what a reader
//	         knows: in when it is the previous witness's successor (a chain's
//	         pages), nev (the events' count), disp when pending, ack when 0
//
// The receipts and disposition of a witness inside grp (a follower) are
// written only when they change, into a small overlay item at that
// witness's own key (witness#<generation>#<attempt>):
//
//	ov   N   the overlay layout's version (1)
//	nev  N   the follower's number of events (bounds its receipts, as in a witness item)
//	ack  N   its receipts
//	disp S   its disposition
//
// A read of generation G queries the sort keys of generations
// G-(store.MaxWitnessGroup-1) through G (a group spans fewer than
// store.MaxWitnessGroup generations), keeps the witnesses of G from single
// items, group heads and their followers, and applies each follower's
// overlay. Items written before groups (one witness an item) are read as
// they always were.
const (
	attrGroupVersion       = "gv"
	attrGroupLast          = "lg"
	attrGroup              = "grp"
	attrGroupGen           = "g"
	attrGroupAttempt       = "a"
	attrGroupAttemptPrefix = "ap"
	attrOverlayVersion     = "ov"

	groupLayout   = 1
	overlayLayout = 1
)

// groupItem is the one item of a witness group (ws validated, len >= 2).
func groupItem(ws []reconcile.Witness) item {
	it := witnessItem(ws[0])
	followers := make([]types.AttributeValue, 0, len(ws)-1)
	for i, w := range ws[1:] {
		m := witnessItem(w)
		delete(m, attrPK)
		delete(m, attrSK)
		delete(m, attrNEvents)
		if bytes.Equal(w.InputCursor, ws[i].Successor) {
			delete(m, attrInput)
		}
		if w.Disposition == reconcile.Pending {
			delete(m, attrDisp)
		}
		if w.AckedThrough == 0 {
			delete(m, attrAcked)
		}
		m[attrGroupGen] = avU(w.Generation)
		// Attempt ids of one process share a long prefix: the part after
		// the one it shares with the first witness's.
		shared := commonPrefix(ws[0].AttemptID, w.AttemptID)
		if shared > 0 {
			m[attrGroupAttemptPrefix] = avU(uint64(shared))
		}
		m[attrGroupAttempt] = avS(w.AttemptID[shared:])
		followers = append(followers, &types.AttributeValueMemberM{Value: m})
	}
	it[attrGroupVersion] = avU(groupLayout)
	it[attrGroupLast] = avU(ws[len(ws)-1].Generation)
	it[attrGroup] = &types.AttributeValueMemberL{Value: followers}
	return it
}

// decodeGroup decodes a witness item: the witness itself, and its
// followers when it heads a group.
func decodeGroup(it item) ([]reconcile.Witness, error) {
	head, err := decodeWitness(it)
	if err != nil {
		return nil, err
	}
	out := []reconcile.Witness{head}
	v, grouped, err := getU(it, attrGroupVersion)
	if err != nil || !grouped {
		return out, err
	}
	if v != groupLayout {
		return nil, fmt.Errorf("%w: witness group of layout %d (this release reads %d)", errMalformed, v, groupLayout)
	}
	l, ok := it[attrGroup].(*types.AttributeValueMemberL)
	if !ok {
		return nil, fmt.Errorf("%w: witness group without its list", errMalformed)
	}
	pk := it[attrPK]
	prev := head
	for _, f := range l.Value {
		m, ok := f.(*types.AttributeValueMemberM)
		if !ok {
			return nil, fmt.Errorf("%w: witness group entry is not a map", errMalformed)
		}
		gen, _, err := getU(m.Value, attrGroupGen)
		if err != nil {
			return nil, err
		}
		rest, err := getS(m.Value, attrGroupAttempt)
		if err != nil {
			return nil, err
		}
		shared, _, err := getU(m.Value, attrGroupAttemptPrefix)
		if err != nil {
			return nil, err
		}
		if shared > uint64(len(head.AttemptID)) {
			return nil, fmt.Errorf("%w: witness group entry shares %d bytes of a %d-byte attempt id", errMalformed, shared, len(head.AttemptID))
		}
		attempt := head.AttemptID[:shared] + rest
		fi := make(item, len(m.Value)+2)
		for k, v := range m.Value {
			fi[k] = v
		}
		fi[attrPK] = pk
		fi[attrSK] = avS(witnessSK(gen, attempt))
		if _, ok := fi[attrInput]; !ok {
			fi[attrInput] = avB(prev.Successor)
		}
		if _, ok := fi[attrDisp]; !ok {
			fi[attrDisp] = avS(dispositionNames[reconcile.Pending])
		}
		if _, ok := fi[attrAcked]; !ok {
			fi[attrAcked] = avU(0)
		}
		w, err := decodeWitness(fi)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
		prev = w
	}
	return out, nil
}

// overlay is the receipts and disposition of a follower.
type overlay struct {
	acked int
	disp  reconcile.Disposition
}

func isOverlay(it item) bool { _, ok := it[attrOverlayVersion]; return ok }

func decodeOverlay(it item) (overlay, error) {
	v, _, err := getU(it, attrOverlayVersion)
	if err != nil {
		return overlay{}, err
	}
	if v != overlayLayout {
		return overlay{}, fmt.Errorf("%w: witness overlay of layout %d (this release reads %d)", errMalformed, v, overlayLayout)
	}
	acked, _, err := getU(it, attrAcked)
	if err != nil {
		return overlay{}, err
	}
	ds, err := getS(it, attrDisp)
	if err != nil {
		return overlay{}, err
	}
	d, err := parseDisposition(ds)
	return overlay{acked: int(acked), disp: d}, err
}

type witnessRef struct {
	gen     uint64
	attempt string
}

// decodeWitnessItems decodes the witness items of one query (single
// witnesses, group heads with their followers, overlays) into the
// witnesses whose generation keep accepts, each follower with its overlay
// applied.
func decodeWitnessItems(items []item, keep func(uint64) bool) ([]reconcile.Witness, error) {
	overlays := map[witnessRef]overlay{}
	var out []reconcile.Witness
	seen := map[witnessRef]bool{}
	for _, it := range items {
		if isOverlay(it) {
			sk, err := getS(it, attrSK)
			if err != nil {
				return nil, err
			}
			gen, attempt, err := parseWitnessSK(sk)
			if err != nil {
				return nil, err
			}
			o, err := decodeOverlay(it)
			if err != nil {
				return nil, err
			}
			overlays[witnessRef{gen, attempt}] = o
			continue
		}
		ws, err := decodeGroup(it)
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			ref := witnessRef{w.Generation, w.AttemptID}
			if !keep(w.Generation) || seen[ref] {
				continue
			}
			seen[ref] = true
			out = append(out, w)
		}
	}
	for i := range out {
		if o, ok := overlays[witnessRef{out[i].Generation, out[i].AttemptID}]; ok {
			out[i].AckedThrough = max(out[i].AckedThrough, o.acked)
			if o.disp != reconcile.Pending {
				out[i].Disposition = o.disp
			}
		}
	}
	return out, nil
}

// groupFloor is the first generation whose group may hold a witness of
// generation gen.
func groupFloor(gen uint64) uint64 {
	if gen < store.MaxWitnessGroup-1 {
		return 0
	}
	return gen - (store.MaxWitnessGroup - 1)
}

// PutWitnesses implements store.WitnessGrouper with one PutItem of the
// group's item, conditional on attribute_not_exists(pk) (the first
// witness's key). A failed condition is an idempotent no-op once a
// consistent read shows the same group; anything else stored there is
// fenced. A group of one is PutWitness.
func (s *DynamoStore) PutWitnesses(ctx context.Context, ws []reconcile.Witness) error {
	if err := store.ValidateWitnessGroup(ws); err != nil {
		return err
	}
	if len(ws) == 1 {
		return s.PutWitness(ctx, ws[0])
	}
	k := store.Key{Scope: ws[0].Scope, Partition: ws[0].Partition}
	it := groupItem(ws)
	if s.ttl > 0 {
		it[attrExpires] = avU(uint64(s.now().Add(s.ttl).Unix()))
	}
	if n := ItemSize(it); n > maxItemBytes {
		return fmt.Errorf("%w: a group of %d witnesses is a %d-byte item, over DynamoDB's %d-byte limit; it is refused, never cut", store.ErrInvalid, len(ws), n, maxItemBytes)
	}
	e := newExpr()
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     it,
		ConditionExpression:      aws.String("attribute_not_exists(" + e.n(attrPK) + ")"),
		ExpressionAttributeNames: e.names,
	})
	if err == nil {
		return nil
	}
	if !isConditionFailed(err) {
		return s.wrap("put witnesses", k, err)
	}
	old, err := s.get(ctx, witnessKey(k, ws[0].Generation, ws[0].AttemptID))
	if err != nil {
		return s.wrap("put witnesses: reading the stored group of", k, err)
	}
	if old != nil && !isOverlay(old) {
		stored, err := decodeGroup(old)
		if err != nil {
			return err
		}
		if len(stored) == len(ws) {
			same := true
			for i := range ws {
				same = same && store.SameWitness(stored[i], ws[i])
			}
			if same {
				return nil
			}
		}
	}
	return &store.FenceError{Key: k, Op: "put witnesses", Reason: fmt.Sprintf("attempt %q at generation %d is already stored with different content", ws[0].AttemptID, ws[0].Generation), WantGeneration: ws[0].Generation}
}

// follower finds the witness (generation, attempt) inside a group that
// begins before it; ok is false when no group holds it.
func (s *DynamoStore) follower(ctx context.Context, k store.Key, generation uint64, attempt string) (reconcile.Witness, bool, error) {
	if generation == 0 {
		return reconcile.Witness{}, false, nil
	}
	e := newExpr()
	cond := fmt.Sprintf("%s = %s AND %s BETWEEN %s AND %s", e.n(attrPK), e.v("pk", avS(checkpointPK(k))), e.n(attrSK),
		e.v("lo", avS(witnessPrefix(groupFloor(generation)))), e.v("hi", avS(witnessPrefix(generation-1)+"~")))
	items, err := s.queryItems(ctx, e, cond, "")
	if err != nil {
		return reconcile.Witness{}, false, err
	}
	for _, it := range items {
		if isOverlay(it) {
			continue
		}
		if _, grouped := it[attrGroupVersion]; !grouped {
			continue
		}
		ws, err := decodeGroup(it)
		if err != nil {
			return reconcile.Witness{}, false, err
		}
		for _, w := range ws[1:] {
			if w.Generation == generation && w.AttemptID == attempt {
				return w, true, nil
			}
		}
	}
	return reconcile.Witness{}, false, nil
}

// updateOverlay writes a follower's overlay: set (an update of ack or
// disp) under cond, creating the overlay with the follower's event count,
// receipts and disposition when there is none yet. It reports whether the
// condition held.
func (s *DynamoStore) updateOverlay(ctx context.Context, k store.Key, w reconcile.Witness, e *expr, set []string, cond string) (bool, error) {
	set = append(set,
		e.n(attrOverlayVersion)+" = "+e.v("ov", avU(overlayLayout)),
		e.n(attrNEvents)+" = "+e.v("nev", avU(uint64(len(w.Events)))))
	if s.ttl > 0 {
		set = append(set, e.n(attrExpires)+" = if_not_exists("+e.n(attrExpires)+", "+e.v("exp", avU(uint64(s.now().Add(s.ttl).Unix())))+")")
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       witnessKey(k, w.Generation, w.AttemptID),
		UpdateExpression:          aws.String("SET " + joinComma(set)),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
	})
	if err == nil {
		return true, nil
	}
	if isConditionFailed(err) {
		return false, nil
	}
	return false, err
}

func joinComma(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += s
	}
	return out
}

// recordFollowerReceipt raises a follower's receipts in its overlay
// (created from the group's values when absent). A count it already has is
// a no-op.
func (s *DynamoStore) recordFollowerReceipt(ctx context.Context, k store.Key, w reconcile.Witness, ackedThrough int) error {
	if ackedThrough > len(w.Events) {
		return fmt.Errorf("%w: acked through %d of a witness of %d events", store.ErrInvalid, ackedThrough, len(w.Events))
	}
	if ackedThrough <= w.AckedThrough {
		return nil
	}
	e := newExpr()
	n := e.v("n", avU(uint64(ackedThrough)))
	set := []string{
		e.n(attrAcked) + " = " + n,
		e.n(attrDisp) + " = if_not_exists(" + e.n(attrDisp) + ", " + e.v("d", avS(dispositionNames[w.Disposition])) + ")",
	}
	if _, err := s.updateOverlay(ctx, k, w, e, set, fmt.Sprintf("attribute_not_exists(%s) OR %s < %s", e.n(attrPK), e.n(attrAcked), n)); err != nil {
		return s.wrap("record receipt of", k, err)
	}
	// A failed condition: the overlay already holds at least as many.
	return nil
}

// setFollowerDisposition moves a follower's disposition from pending in
// its overlay (created from the group's values when absent).
func (s *DynamoStore) setFollowerDisposition(ctx context.Context, k store.Key, w reconcile.Witness, d reconcile.Disposition) error {
	if w.Disposition != reconcile.Pending {
		if w.Disposition == d {
			return nil
		}
		return store.DispositionFence(k, w.Generation, w.AttemptID, w.Disposition, d)
	}
	e := newExpr()
	set := []string{
		e.n(attrDisp) + " = " + e.v("d", avS(dispositionNames[d])),
		e.n(attrAcked) + " = if_not_exists(" + e.n(attrAcked) + ", " + e.v("ack", avU(uint64(w.AckedThrough))) + ")",
	}
	ok, err := s.updateOverlay(ctx, k, w, e, set, fmt.Sprintf("attribute_not_exists(%s) OR %s = %s", e.n(attrPK), e.n(attrDisp), e.v("pending", avS(dispositionNames[reconcile.Pending]))))
	if err != nil {
		return s.wrap("set disposition of", k, err)
	}
	if ok {
		return nil
	}
	it, err := s.get(ctx, witnessKey(k, w.Generation, w.AttemptID))
	if err != nil {
		return s.wrap("set disposition: reading the overlay of", k, err)
	}
	o, err := decodeOverlay(it)
	if err != nil {
		return err
	}
	if o.disp == d {
		return nil
	}
	return store.DispositionFence(k, w.Generation, w.AttemptID, o.disp, d)
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
