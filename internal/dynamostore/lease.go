package dynamostore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tidemark/tidemark/internal/store"
)

// Lease writes (store.ClaimLease, ReleaseLease): ONE UpdateItem
// on the checkpoint item each, with ReturnValues ALL_NEW, changing only the
// lease attributes lo (owner, S) and lc (counter, N):
//
//	operation     update                     condition
//	ClaimLease    SET lo = :o, lc = :e + 1   attribute_exists(pk) AND lease = :expect
//	ReleaseLease  SET lc = :h + 1 REMOVE lo  lo = :ho AND lc = :h
//
// where "lease = :expect" reads an absent lo as the empty owner and an
// absent lc as counter 0. The lease sits on the checkpoint item, so the
// lease condition of Promote and SetParked (lo = :lo AND lc = :lc) is part
// of the same single-item condition as the cursor and generation.
//
// After a failed condition the winner is read with a consistent GetItem. A
// winner that already holds the write's exact result is the SDK's retry of
// an applied write whose response was lost, and is returned as success
// (owners are unique per process incarnation, see internal/store/lease.go).

// ClaimLease implements store.Store.
func (s *DynamoStore) ClaimLease(ctx context.Context, k store.Key, expect store.Lease, owner string) (store.Checkpoint, error) {
	if err := store.ValidateClaim(k, expect, owner); err != nil {
		return store.Checkpoint{}, err
	}
	next := store.ClaimedLease(expect, owner)
	e := newExpr()
	cond := "attribute_exists(" + e.n(attrPK) + ") AND " + leaseEquals(e, "e", expect)
	update := "SET " + e.n(attrLeaseOwner) + " = " + e.v("no", avS(next.Owner)) + ", " + e.n(attrLeaseCounter) + " = " + e.v("nc", avU(next.Counter))
	return s.writeLease(ctx, k, "claim lease", expect, next, e, update, cond)
}

// ReleaseLease implements store.Store.
func (s *DynamoStore) ReleaseLease(ctx context.Context, k store.Key, held store.Lease) (store.Checkpoint, error) {
	if err := store.ValidateHeld(k, held); err != nil {
		return store.Checkpoint{}, err
	}
	next := store.ReleasedLease(held)
	e := newExpr()
	update := "SET " + e.n(attrLeaseCounter) + " = " + e.v("nc", avU(next.Counter)) + " REMOVE " + e.n(attrLeaseOwner)
	return s.writeLease(ctx, k, "release lease", held, next, e, update, leaseEquals(e, "h", held))
}

// leaseEquals is the condition "the stored lease is exactly l" (an absent
// owner is the empty owner, an absent counter is 0); prefix keeps its
// placeholders apart from the request's others.
func leaseEquals(e *expr, prefix string, l store.Lease) string {
	lo, lc := e.n(attrLeaseOwner), e.n(attrLeaseCounter)
	owner := "attribute_not_exists(" + lo + ")"
	if l.Owner != "" {
		owner = lo + " = " + e.v(prefix+"o", avS(l.Owner))
	}
	counter := lc + " = " + e.v(prefix+"c", avU(l.Counter))
	if l.Counter == 0 {
		counter = "(attribute_not_exists(" + lc + ") OR " + counter + ")"
	}
	return owner + " AND " + counter
}

// writeLease performs one lease write: want is the lease its condition
// requires, next the lease it writes.
func (s *DynamoStore) writeLease(ctx context.Context, k store.Key, op string, want, next store.Lease, e *expr, update, cond string) (store.Checkpoint, error) {
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       checkpointKey(k),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
		ReturnValues:              types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		w, readErr := s.winner(ctx, k)
		switch {
		case w != nil && w.Lease == next:
			return *w, nil
		case w == nil && readErr == "":
			return store.Checkpoint{}, fmt.Errorf("%w: no checkpoint for %s (a lease lives on the checkpoint: create it first)", store.ErrNotFound, k)
		case w == nil:
			return store.Checkpoint{}, &store.FenceError{Key: k, Op: op, Reason: fmt.Sprintf("the stored lease is not %s%s", want, readErr)}
		}
		return store.Checkpoint{}, store.LeaseFence(k, op, want, w, readErr)
	}
	if err != nil {
		return store.Checkpoint{}, s.wrap(op+" of", k, err)
	}
	return decodeCheckpoint(k, out.Attributes)
}
