package reconcile

// CanPublish states, for the tests, the property the promotion procedure
// keeps: a losing retry never publishes its candidate successor. The
// product needs no such call (a loser's successor is never read again:
// the chain reloads the winning checkpoint and Abandon disposes of the
// loser's witness), so it lives with the tests that check the property.

// CanPublish reports whether w's successor may still be published: only
// while the observed checkpoint still holds w's (scope, partition, cursor,
// generation) and w is neither abandoned nor promoted. Once another
// response's promotion is observed, it is false for every other witness of
// (C, G), forever: generations only grow.
func CanPublish(observed Checkpoint, w Witness) bool {
	return observed.holds(w) && w.Disposition != Abandoned && w.Disposition != Promoted
}
