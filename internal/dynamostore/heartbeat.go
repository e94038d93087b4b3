package dynamostore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tidemark/tidemark/internal/store"
)

// Heartbeats (store.HeartbeatStore; internal/store/heartbeat.go): one item
// per instance, pk "<scope>##heartbeat", sk "hb#<owner>", so that every
// heartbeat of a scope is read with ONE Query. Attributes: n (counter, N),
// held (partitions held, N), tk (owner that took it over, S; absent while
// live).
//
//	operation          request     condition
//	RenewHeartbeat     UpdateItem  (n = :n AND attribute_not_exists(tk)), or attribute_not_exists(pk) when :n = 0
//	TakeOverHeartbeat  UpdateItem  n = :n AND attribute_not_exists(tk)
//	DeleteHeartbeat    DeleteItem  n = :n AND (tk = :tk | attribute_not_exists(tk))
//	ListHeartbeats     Query       pk = "<scope>##heartbeat" (consistent)
//
// After a failed condition the stored heartbeat is read with a consistent
// GetItem: a stored exact result is the SDK's retry of an applied write.

const (
	recHeartbeat    = "heartbeat"
	skHeartbeatPre  = "hb#"
	attrHBHeld      = "held"
	attrHBTakenBy   = "tk"
	attrHBCounter   = attrCount
	opRenewHB       = "renew heartbeat"
	opTakeOverHB    = "take over heartbeat"
	opDeleteHB      = "delete heartbeat"
	heartbeatPrefix = "heartbeat of "
)

func heartbeatKey(scope, owner string) item {
	return item{attrPK: avS(recordPK(scope, recHeartbeat)), attrSK: avS(skHeartbeatPre + owner)}
}

// RenewHeartbeat implements store.Store.
func (s *DynamoStore) RenewHeartbeat(ctx context.Context, hb store.Heartbeat, held int) (store.Heartbeat, error) {
	if err := store.ValidateHeartbeat(hb); err != nil {
		return store.Heartbeat{}, err
	}
	if held < 0 {
		return store.Heartbeat{}, fmt.Errorf("%w: held %d", store.ErrInvalid, held)
	}
	next := store.RenewedHeartbeat(hb, held)
	e := newExpr()
	var cond string
	if hb.Counter > 0 {
		cond = e.n(attrHBCounter) + " = " + e.v("c", avU(hb.Counter)) + " AND attribute_not_exists(" + e.n(attrHBTakenBy) + ")"
	} else {
		cond = "attribute_not_exists(" + e.n(attrPK) + ")"
	}
	update := "SET " + e.n(attrHBCounter) + " = " + e.v("nc", avU(next.Counter)) + ", " + e.n(attrHBHeld) + " = " + e.v("h", avI(int64(held)))
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       heartbeatKey(hb.Scope, hb.Owner),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
	})
	if isConditionFailed(err) {
		stored, rerr := s.loadHeartbeat(ctx, hb.Scope, hb.Owner)
		if rerr != nil {
			return store.Heartbeat{}, store.HeartbeatFence(hb, opRenewHB, fmt.Sprintf("the condition failed; reading the winner failed: %v", rerr))
		}
		if store.HeartbeatRenewApplied(hb, stored) {
			return *stored, nil
		}
		why := store.HeartbeatRenewConflict(hb, stored)
		if why == "" {
			why = "the heartbeat changed while the condition was evaluated"
		}
		return store.Heartbeat{}, store.HeartbeatFence(hb, opRenewHB, why)
	}
	if err != nil {
		return store.Heartbeat{}, s.wrap(opRenewHB, name(heartbeatPrefix+hb.Owner), err)
	}
	return next, nil
}

// TakeOverHeartbeat implements store.Store.
func (s *DynamoStore) TakeOverHeartbeat(ctx context.Context, seen store.Heartbeat, by string) (store.Heartbeat, error) {
	if err := store.ValidateHeartbeat(seen); err != nil {
		return store.Heartbeat{}, err
	}
	if err := store.CheckName("heartbeat taker", by); err != nil {
		return store.Heartbeat{}, err
	}
	e := newExpr()
	cond := e.n(attrHBCounter) + " = " + e.v("c", avU(seen.Counter)) + " AND attribute_not_exists(" + e.n(attrHBTakenBy) + ")"
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       heartbeatKey(seen.Scope, seen.Owner),
		UpdateExpression:          aws.String("SET " + e.n(attrHBTakenBy) + " = " + e.v("tk", avS(by))),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
		ReturnValues:              types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		stored, rerr := s.loadHeartbeat(ctx, seen.Scope, seen.Owner)
		if rerr != nil {
			return store.Heartbeat{}, store.HeartbeatFence(seen, opTakeOverHB, fmt.Sprintf("the condition failed; reading the winner failed: %v", rerr))
		}
		if store.HeartbeatTakeOverApplied(seen, by, stored) {
			return *stored, nil
		}
		why := store.HeartbeatTakeOverConflict(seen, stored)
		if why == "" {
			why = "the heartbeat changed while the condition was evaluated"
		}
		return store.Heartbeat{}, store.HeartbeatFence(seen, opTakeOverHB, why)
	}
	if err != nil {
		return store.Heartbeat{}, s.wrap(opTakeOverHB, name(heartbeatPrefix+seen.Owner), err)
	}
	return decodeHeartbeat(seen.Scope, out.Attributes)
}

// ListHeartbeats implements store.Store with one consistent Query (paged
// past 1 MB, which takes thousands of instances).
func (s *DynamoStore) ListHeartbeats(ctx context.Context, scope string) ([]store.Heartbeat, error) {
	if err := store.CheckName("scope", scope); err != nil {
		return nil, err
	}
	e := newExpr()
	cond := e.n(attrPK) + " = " + e.v("pk", avS(recordPK(scope, recHeartbeat)))
	items, err := s.queryItems(ctx, e, cond, "")
	if err != nil {
		return nil, s.wrap("list heartbeats of", name(scope), err)
	}
	out, err := decodeItems(items, func(it item) (store.Heartbeat, error) { return decodeHeartbeat(scope, it) })
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b store.Heartbeat) int { return strings.Compare(a.Owner, b.Owner) })
	return out, nil
}

// DeleteHeartbeat implements store.Store.
func (s *DynamoStore) DeleteHeartbeat(ctx context.Context, hb store.Heartbeat) error {
	if err := store.ValidateHeartbeat(hb); err != nil {
		return err
	}
	e := newExpr()
	taken := "attribute_not_exists(" + e.n(attrHBTakenBy) + ")"
	if hb.Taken() {
		taken = e.n(attrHBTakenBy) + " = " + e.v("tk", avS(hb.TakenBy))
	}
	cond := "attribute_not_exists(" + e.n(attrPK) + ") OR (" + e.n(attrHBCounter) + " = " + e.v("c", avU(hb.Counter)) + " AND " + taken + ")"
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       heartbeatKey(hb.Scope, hb.Owner),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.vals(),
	})
	if isConditionFailed(err) {
		stored, rerr := s.loadHeartbeat(ctx, hb.Scope, hb.Owner)
		why := ""
		if rerr != nil {
			why = fmt.Sprintf("the condition failed; reading the winner failed: %v", rerr)
		} else if why = store.HeartbeatDeleteConflict(hb, stored); why == "" {
			return nil // deleted meanwhile (a repeat)
		}
		return store.HeartbeatFence(hb, opDeleteHB, why)
	}
	if err != nil {
		return s.wrap(opDeleteHB, name(heartbeatPrefix+hb.Owner), err)
	}
	return nil
}

// loadHeartbeat reads one heartbeat consistently (nil: none stored).
func (s *DynamoStore) loadHeartbeat(ctx context.Context, scope, owner string) (*store.Heartbeat, error) {
	it, err := s.get(ctx, heartbeatKey(scope, owner))
	if err != nil || it == nil {
		return nil, err
	}
	hb, err := decodeHeartbeat(scope, it)
	if err != nil {
		return nil, err
	}
	return &hb, nil
}

func decodeHeartbeat(scope string, it item) (store.Heartbeat, error) {
	sk, err := getS(it, attrSK)
	if err != nil {
		return store.Heartbeat{}, err
	}
	owner, ok := strings.CutPrefix(sk, skHeartbeatPre)
	if !ok {
		return store.Heartbeat{}, fmt.Errorf("dynamostore: heartbeat item with sort key %q", sk)
	}
	hb := store.Heartbeat{Scope: scope, Owner: owner}
	if hb.Counter, _, err = getU(it, attrHBCounter); err != nil {
		return store.Heartbeat{}, err
	}
	held, _, err := getU(it, attrHBHeld)
	if err != nil {
		return store.Heartbeat{}, err
	}
	hb.Held = int(held)
	if _, ok := it[attrHBTakenBy]; ok {
		if hb.TakenBy, err = getS(it, attrHBTakenBy); err != nil {
			return store.Heartbeat{}, err
		}
	}
	return hb, nil
}
