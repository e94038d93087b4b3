package dynamostore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tidemark/tidemark/internal/coord"
	"github.com/tidemark/tidemark/internal/reconcile"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/provider"
)

// Key design and attribute names; doc.go has the table. Attribute names
// are short because DynamoDB bills them in every item.
const (
	attrPK = "pk"
	attrSK = "sk"

	skCheckpoint    = "checkpoint"
	skWitnessPrefix = "witness#"
	skRecord        = "record"
	skCache         = "cache"

	recMembership = "membership"
	recFrontier   = "frontier"
	recPartitions = "partitions"
	recDiscovery  = "discovery"

	// checkpoint
	attrCursor       = "cur"
	attrGeneration   = "gen"
	attrWMKind       = "wmk"
	attrWM           = "wm"
	attrApplied      = "app"
	attrAppliedKind  = "appk"
	attrAppliedID    = "appid"
	attrFinality     = "fin"
	attrEpoch        = "ep"
	attrWitnessID    = "wid"
	attrParked       = "park"
	attrFailing      = "fail" // S: the failure note (store.Checkpoint.Failing; absent: none)
	attrComplete     = "done"
	attrLeaseOwner   = "lo"
	attrLeaseCounter = "lc"
	attrViolations   = "cv"
	attrIncarnation  = "inc"  // S: hash of the source incarnation (absent: none recorded)
	attrIncEpoch     = "ince" // N: epoch of the reset into it (absent: 0)
	attrRepairs      = "rep"  // S: the repair log as JSON (store.EncodeRepairs; absent: none)
	// The re-read window's state (store.RereadState; absent: no pass yet):
	// the exclusive start of the current pass's range and the applied
	// boundary it started at, each a position with its kind.
	attrRereadFrom     = "rrf"
	attrRereadFromKind = "rrfk"
	attrRereadMark     = "rrm"
	attrRereadMarkKind = "rrmk"

	// witness
	attrInput     = "in"
	attrSuccessor = "succ"
	attrMarker    = "mk"
	attrEvents    = "ev"
	attrNEvents   = "nev"
	attrCTKind    = "ctk"
	attrCT        = "ct"
	attrSealed    = "seal"
	attrDisp      = "disp"
	attrAcked     = "ack"
	attrExpires   = "exp" // DynamoDB TTL (epoch seconds), with WitnessTTL

	// membership and frontier records (attrEpoch, attrWMKind/attrWM too)
	attrParts   = "parts"
	attrUnprov  = "unproven"
	attrVersion = "ver"
	attrCutKind = "cutk"
	attrCut     = "cut"
	attrProven  = "proven"
	attrReason  = "why"
	attrVector  = "vec"
	attrHeldBy  = "held"
	attrLineage = "lin"
	attrIncs    = "incs" // M: member -> N, the epoch of an unproven incarnation change
	attrCount   = "n"

	// vector entries
	attrEntryKind  = "k"
	attrEntryValue = "v"

	// cache items
	attrValue = "v"
)

// maxItemBytes is DynamoDB's item size limit (400 KB).
const maxItemBytes = 400 << 10

type item = map[string]types.AttributeValue

var nameEscaper = strings.NewReplacer("%", "%25", "#", "%23")
var nameUnescaper = strings.NewReplacer("%25", "%", "%23", "#")

// escapeName makes a name free of '#', so that '#' separates the parts of a
// key unambiguously: ("a#b", "c") and ("a", "b#c") get different keys.
func escapeName(s string) string { return nameEscaper.Replace(s) }

// checkpointPK is <scope>#<partition>, both escaped: it holds exactly one
// '#'.
func checkpointPK(k store.Key) string { return escapeName(k.Scope) + "#" + escapeName(k.Partition) }

// recordPK is <scope>##<record>: two '#', so no partition's key can equal
// it whatever the partition is named.
func recordPK(scope, record string) string { return escapeName(scope) + "##" + record }

func parseCheckpointPK(pk string) (store.Key, error) {
	scope, part, ok := strings.Cut(pk, "#")
	if !ok || strings.Contains(part, "#") {
		return store.Key{}, fmt.Errorf("dynamostore: %q is not a checkpoint key", pk)
	}
	return store.Key{Scope: nameUnescaper.Replace(scope), Partition: nameUnescaper.Replace(part)}, nil
}

// witnessSK is witness#<generation, 20 digits>#<attempt>. The fixed width
// keeps generation 1 from being a prefix of 10, and the attempt id is last,
// so it needs no escaping.
func witnessSK(generation uint64, attempt string) string {
	return witnessPrefix(generation) + attempt
}

func witnessPrefix(generation uint64) string {
	return fmt.Sprintf("%s%020d#", skWitnessPrefix, generation)
}

func parseWitnessSK(sk string) (uint64, string, error) {
	rest, ok := strings.CutPrefix(sk, skWitnessPrefix)
	if !ok || len(rest) < 21 || rest[20] != '#' {
		return 0, "", fmt.Errorf("dynamostore: %q is not a witness sort key", sk)
	}
	gen, err := strconv.ParseUint(rest[:20], 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("dynamostore: %q is not a witness sort key: %w", sk, err)
	}
	return gen, rest[21:], nil
}

func checkpointKey(k store.Key) item {
	return item{attrPK: avS(checkpointPK(k)), attrSK: avS(skCheckpoint)}
}

func witnessKey(k store.Key, generation uint64, attempt string) item {
	return item{attrPK: avS(checkpointPK(k)), attrSK: avS(witnessSK(generation, attempt))}
}

func recordKey(scope, record string) item {
	return item{attrPK: avS(recordPK(scope, record)), attrSK: avS(skRecord)}
}

// Attribute value constructors.

func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func avB(b []byte) types.AttributeValue {
	if b == nil {
		b = []byte{}
	}
	return &types.AttributeValueMemberB{Value: b}
}

func avU(u uint64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatUint(u, 10)}
}

func avI(i int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(i, 10)}
}

func avBool(b bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: b} }

func avStrings(ss []string) types.AttributeValue {
	l := make([]types.AttributeValue, len(ss))
	for i, s := range ss {
		l[i] = avS(s)
	}
	return &types.AttributeValueMemberL{Value: l}
}

// watermarkValue is the stored value of a watermark: N for integer and
// timestamp coordinates, B (the string's bytes) for string coordinates, so
// that DynamoDB's <= orders it the way coord.Watermark.Compare does (B
// compares as unsigned bytes, like strings.Compare; S would compare UTF-8
// and reject invalid UTF-8).
func watermarkValue(w coord.Watermark) types.AttributeValue {
	switch w.Kind {
	case coord.KindString:
		return avB([]byte(w.Str))
	case coord.KindDecimal:
		return avB(decimalKey(w.Str))
	}
	return avI(w.Int)
}

// decimalKey is the stored form of a canonical decimal: its digit count as
// 4 bytes big-endian, then its digits, so that DynamoDB's byte-wise order of
// binary values (used by the watermark's conditional `<=`) is numeric order.
// DynamoDB numbers hold 38 digits; sequence numbers have more.
func decimalKey(d string) []byte {
	b := make([]byte, 4, 4+len(d))
	binary.BigEndian.PutUint32(b, uint32(len(d)))
	return append(b, d...)
}

func decimalFromKey(b []byte) (string, error) {
	if len(b) < 4 || int(binary.BigEndian.Uint32(b)) != len(b)-4 {
		return "", fmt.Errorf("%w: decimal value of %d bytes has a bad length prefix", errMalformed, len(b))
	}
	w, err := coord.Decimal(string(b[4:]))
	if err != nil {
		return "", fmt.Errorf("%w: %v", errMalformed, err)
	}
	return w.Str, nil
}

// putPosition stores an applied position: its kind in kindAttr (omitted for
// integers, the form written before positions had kinds) and its value as
// a watermark's.
func putPosition(it item, kindAttr, valueAttr string, p coord.Position) {
	if p.Kind != coord.KindInteger {
		it[kindAttr] = avU(uint64(p.Kind))
	}
	it[valueAttr] = watermarkValue(p.AsWatermark())
}

// getPosition reads what putPosition wrote; ok is false when it is absent.
func getPosition(it item, kindAttr, valueAttr string) (coord.Position, bool, error) {
	if _, ok := it[valueAttr]; !ok {
		return coord.Position{}, false, nil
	}
	if _, ok := it[kindAttr]; !ok {
		n, _, err := getI(it, valueAttr)
		return coord.IntPosition(n), err == nil, err
	}
	w, err := getWatermark(it, kindAttr, valueAttr)
	return coord.Position(w), err == nil && !w.IsZero(), err
}

func putWatermark(it item, kindAttr, valueAttr string, w coord.Watermark) {
	if w.IsZero() {
		return
	}
	it[kindAttr] = avU(uint64(w.Kind))
	it[valueAttr] = watermarkValue(w)
}

// Attribute value readers. A missing attribute reads as the zero value;
// an attribute of the wrong type is an error.

var errMalformed = errors.New("dynamostore: malformed item")

func getS(it item, name string) (string, error) {
	switch v := it[name].(type) {
	case nil:
		return "", nil
	case *types.AttributeValueMemberS:
		return v.Value, nil
	}
	return "", fmt.Errorf("%w: attribute %s is not a string", errMalformed, name)
}

func getB(it item, name string) ([]byte, error) {
	switch v := it[name].(type) {
	case nil:
		return nil, nil
	case *types.AttributeValueMemberB:
		if len(v.Value) == 0 {
			return nil, nil
		}
		return v.Value, nil
	}
	return nil, fmt.Errorf("%w: attribute %s is not binary", errMalformed, name)
}

func getU(it item, name string) (uint64, bool, error) {
	switch v := it[name].(type) {
	case nil:
		return 0, false, nil
	case *types.AttributeValueMemberN:
		u, err := strconv.ParseUint(v.Value, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%w: attribute %s: %w", errMalformed, name, err)
		}
		return u, true, nil
	}
	return 0, false, fmt.Errorf("%w: attribute %s is not a number", errMalformed, name)
}

func getI(it item, name string) (int64, bool, error) {
	switch v := it[name].(type) {
	case nil:
		return 0, false, nil
	case *types.AttributeValueMemberN:
		i, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%w: attribute %s: %w", errMalformed, name, err)
		}
		return i, true, nil
	}
	return 0, false, fmt.Errorf("%w: attribute %s is not a number", errMalformed, name)
}

func getBool(it item, name string) (bool, error) {
	switch v := it[name].(type) {
	case nil:
		return false, nil
	case *types.AttributeValueMemberBOOL:
		return v.Value, nil
	}
	return false, fmt.Errorf("%w: attribute %s is not a boolean", errMalformed, name)
}

func getStrings(it item, name string) ([]string, error) {
	switch v := it[name].(type) {
	case nil:
		return nil, nil
	case *types.AttributeValueMemberL:
		if len(v.Value) == 0 {
			return nil, nil
		}
		out := make([]string, len(v.Value))
		for i, e := range v.Value {
			s, ok := e.(*types.AttributeValueMemberS)
			if !ok {
				return nil, fmt.Errorf("%w: attribute %s[%d] is not a string", errMalformed, name, i)
			}
			out[i] = s.Value
		}
		return out, nil
	case *types.AttributeValueMemberSS:
		if len(v.Value) == 0 {
			return nil, nil
		}
		return append([]string(nil), v.Value...), nil
	}
	return nil, fmt.Errorf("%w: attribute %s is not a list of strings", errMalformed, name)
}

func getWatermark(it item, kindAttr, valueAttr string) (coord.Watermark, error) {
	k, ok, err := getU(it, kindAttr)
	if err != nil || !ok || k == 0 {
		return coord.Watermark{}, err
	}
	switch coord.Kind(k) {
	case coord.KindInteger, coord.KindTimestamp:
		i, ok, err := getI(it, valueAttr)
		if err != nil || !ok {
			return coord.Watermark{}, fmt.Errorf("%w: watermark %s without a number: %v", errMalformed, valueAttr, err)
		}
		return coord.Watermark{Kind: coord.Kind(k), Int: i}, nil
	case coord.KindString:
		b, err := getB(it, valueAttr)
		if err != nil {
			return coord.Watermark{}, err
		}
		return coord.Watermark{Kind: coord.KindString, Str: string(b)}, nil
	case coord.KindDecimal:
		b, err := getB(it, valueAttr)
		if err != nil {
			return coord.Watermark{}, err
		}
		d, err := decimalFromKey(b)
		return coord.Watermark{Kind: coord.KindDecimal, Str: d}, err
	}
	return coord.Watermark{}, fmt.Errorf("%w: unknown watermark kind %d in %s", errMalformed, k, kindAttr)
}

// Checkpoints.

func checkpointItem(c store.Checkpoint) item {
	it := checkpointKey(c.Key)
	it[attrCursor] = avB(c.Cursor)
	it[attrGeneration] = avU(c.Generation)
	it[attrEpoch] = avU(c.Epoch)
	putWatermark(it, attrWMKind, attrWM, c.Watermark)
	if !c.Finality.IsZero() && !c.Watermark.IsZero() {
		it[attrFinality] = avS(c.Finality.String())
	}
	if c.HasApplied {
		putPosition(it, attrAppliedKind, attrApplied, c.Applied)
		if c.AppliedID != "" {
			it[attrAppliedID] = avB([]byte(c.AppliedID))
		}
	}
	if c.Reread.HasFrom {
		putPosition(it, attrRereadFromKind, attrRereadFrom, c.Reread.From)
	}
	if c.Reread.Started() {
		putPosition(it, attrRereadMarkKind, attrRereadMark, c.Reread.Mark)
	}
	if c.PromotedWitness != "" {
		it[attrWitnessID] = avS(c.PromotedWitness)
	}
	if r := store.CleanReason(c.Parked); r != "" {
		it[attrParked] = avS(r)
	}
	if f := store.CleanReason(c.Failing); f != "" {
		it[attrFailing] = avS(f)
	}
	if c.Complete {
		it[attrComplete] = avBool(true)
	}
	if !c.Lease.IsZero() {
		it[attrLeaseOwner] = avS(c.Lease.Owner)
		it[attrLeaseCounter] = avU(c.Lease.Counter)
	}
	if len(c.Violations) > 0 {
		it[attrViolations] = avCounts(c.Violations)
	}
	if c.Incarnation != "" {
		it[attrIncarnation] = avS(c.Incarnation)
	}
	if c.IncarnationEpoch != 0 {
		it[attrIncEpoch] = avU(c.IncarnationEpoch)
	}
	putRepairs(it, c.Repairs)
	return it
}

// putRepairs stores a repair log (store.EncodeRepairs) when not empty.
func putRepairs(it item, log []store.RepairEntry) {
	if s, err := store.EncodeRepairs(log); err == nil && s != "" {
		it[attrRepairs] = avS(s)
	}
}

// getRepairs reads a repair log (nil when absent).
func getRepairs(it item) ([]store.RepairEntry, error) {
	s, err := getS(it, attrRepairs)
	if err != nil {
		return nil, err
	}
	log, err := store.DecodeRepairs(s)
	if err != nil {
		return nil, fmt.Errorf("%w: attribute %s: %v", errMalformed, attrRepairs, err)
	}
	return log, nil
}

// avCounts is a map of counts (contract violations by kind).
func avCounts(m map[string]uint64) types.AttributeValue {
	v := make(map[string]types.AttributeValue, len(m))
	for k, n := range m {
		v[k] = avU(n)
	}
	return &types.AttributeValueMemberM{Value: v}
}

// getCounts reads a map of counts (nil when absent or empty).
func getCounts(it item, name string) (map[string]uint64, error) {
	switch v := it[name].(type) {
	case nil:
		return nil, nil
	case *types.AttributeValueMemberM:
		var out map[string]uint64
		for k := range v.Value {
			n, _, err := getU(v.Value, k)
			if err != nil {
				return nil, err
			}
			if out == nil {
				out = make(map[string]uint64, len(v.Value))
			}
			out[k] = n
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: attribute %s is not a map", errMalformed, name)
}

func decodeCheckpoint(k store.Key, it item) (store.Checkpoint, error) {
	c := store.Checkpoint{Key: k}
	var err error
	var ok bool
	errs := make([]error, 0, 8)
	add := func(e error) { errs = append(errs, e) }
	c.Cursor, err = getB(it, attrCursor)
	add(err)
	c.Generation, ok, err = getU(it, attrGeneration)
	add(err)
	if err == nil && !ok {
		add(fmt.Errorf("%w: checkpoint without a generation", errMalformed))
	}
	c.Epoch, _, err = getU(it, attrEpoch)
	add(err)
	c.Watermark, err = getWatermark(it, attrWMKind, attrWM)
	add(err)
	basis, err := getS(it, attrFinality)
	add(err)
	if c.Finality, err = provider.ParseBasis(basis); err != nil {
		add(fmt.Errorf("%w: %v", errMalformed, err))
	}
	c.Applied, c.HasApplied, err = getPosition(it, attrAppliedKind, attrApplied)
	add(err)
	appliedID, err := getB(it, attrAppliedID)
	add(err)
	if c.HasApplied {
		c.AppliedID = string(appliedID)
	}
	c.Reread.From, c.Reread.HasFrom, err = getPosition(it, attrRereadFromKind, attrRereadFrom)
	add(err)
	c.Reread.Mark, _, err = getPosition(it, attrRereadMarkKind, attrRereadMark)
	add(err)
	c.PromotedWitness, err = getS(it, attrWitnessID)
	add(err)
	c.Parked, err = getS(it, attrParked)
	add(err)
	c.Failing, err = getS(it, attrFailing)
	add(err)
	c.Complete, err = getBool(it, attrComplete)
	add(err)
	c.Lease.Owner, err = getS(it, attrLeaseOwner)
	add(err)
	c.Lease.Counter, _, err = getU(it, attrLeaseCounter)
	add(err)
	c.Violations, err = getCounts(it, attrViolations)
	add(err)
	c.Incarnation, err = getS(it, attrIncarnation)
	add(err)
	c.IncarnationEpoch, _, err = getU(it, attrIncEpoch)
	add(err)
	c.Repairs, err = getRepairs(it)
	add(err)
	if err := errors.Join(errs...); err != nil {
		return store.Checkpoint{}, fmt.Errorf("dynamostore: checkpoint %s: %w", k, err)
	}
	return c, nil
}

// Witnesses.

var dispositionNames = map[reconcile.Disposition]string{
	reconcile.Pending:   "pending",
	reconcile.Promoted:  "promoted",
	reconcile.Abandoned: "abandoned",
}

func parseDisposition(s string) (reconcile.Disposition, error) {
	for d, n := range dispositionNames {
		if n == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown disposition %q", errMalformed, s)
}

func witnessItem(w reconcile.Witness) item {
	it := witnessKey(store.Key{Scope: w.Scope, Partition: w.Partition}, w.Generation, w.AttemptID)
	it[attrInput] = avB(w.InputCursor)
	it[attrSuccessor] = avB(w.Successor)
	if len(w.Marker) > 0 {
		it[attrMarker] = avB(w.Marker)
	}
	it[attrEvents] = avB(reconcile.EncodeEvents(w.Events))
	it[attrNEvents] = avU(uint64(len(w.Events)))
	putWatermark(it, attrCTKind, attrCT, w.CompleteThrough)
	if w.Sealed {
		it[attrSealed] = avBool(true)
	}
	it[attrDisp] = avS(dispositionNames[w.Disposition])
	it[attrAcked] = avU(uint64(w.AckedThrough))
	return it
}

func decodeWitness(it item) (reconcile.Witness, error) {
	pk, err := getS(it, attrPK)
	if err != nil {
		return reconcile.Witness{}, err
	}
	sk, err := getS(it, attrSK)
	if err != nil {
		return reconcile.Witness{}, err
	}
	k, err := parseCheckpointPK(pk)
	if err != nil {
		return reconcile.Witness{}, err
	}
	gen, attempt, err := parseWitnessSK(sk)
	if err != nil {
		return reconcile.Witness{}, err
	}
	w := reconcile.Witness{Scope: k.Scope, Partition: k.Partition, Generation: gen, AttemptID: attempt}
	errs := make([]error, 0, 8)
	add := func(e error) { errs = append(errs, e) }
	w.InputCursor, err = getB(it, attrInput)
	add(err)
	w.Successor, err = getB(it, attrSuccessor)
	add(err)
	w.Marker, err = getB(it, attrMarker)
	add(err)
	ev, err := getB(it, attrEvents)
	add(err)
	if err == nil {
		w.Events, err = reconcile.DecodeEvents(ev)
		add(err)
	}
	w.CompleteThrough, err = getWatermark(it, attrCTKind, attrCT)
	add(err)
	w.Sealed, err = getBool(it, attrSealed)
	add(err)
	disp, err := getS(it, attrDisp)
	add(err)
	if err == nil {
		w.Disposition, err = parseDisposition(disp)
		add(err)
	}
	acked, _, err := getU(it, attrAcked)
	add(err)
	w.AckedThrough = int(acked)
	if err := errors.Join(errs...); err != nil {
		return reconcile.Witness{}, fmt.Errorf("dynamostore: witness %s/%s: %w", pk, sk, err)
	}
	return w, nil
}

// Membership and frontier records.

func membershipItem(m store.Membership) item {
	it := recordKey(m.Scope, recMembership)
	it[attrEpoch] = avU(m.Epoch)
	if len(m.Partitions) > 0 {
		it[attrParts] = avStrings(m.Partitions)
	}
	if len(m.Unproven) > 0 {
		it[attrUnprov] = avStrings(m.Unproven)
	}
	putWatermark(it, attrCutKind, attrCut, m.Cutover)
	if m.Proven {
		it[attrProven] = avBool(true)
	}
	if r := store.CleanReason(m.Reason); r != "" {
		it[attrReason] = avS(r)
	}
	if len(m.Parents) > 0 {
		lin := make(map[string]types.AttributeValue, len(m.Parents))
		for c, ps := range m.Parents {
			if len(ps) > 0 {
				ps = slices.Clone(ps)
				slices.Sort(ps)
				lin[c] = avStrings(ps)
			}
		}
		if len(lin) > 0 {
			it[attrLineage] = &types.AttributeValueMemberM{Value: lin}
		}
	}
	if len(m.Incarnations) > 0 {
		incs := make(map[string]types.AttributeValue, len(m.Incarnations))
		for p, e := range m.Incarnations {
			incs[p] = avU(e)
		}
		it[attrIncs] = &types.AttributeValueMemberM{Value: incs}
	}
	putRepairs(it, m.Repairs)
	return it
}

func decodeMembership(scope string, it item) (store.Membership, error) {
	m := store.Membership{Scope: scope}
	var err error
	errs := make([]error, 0, 5)
	add := func(e error) { errs = append(errs, e) }
	m.Epoch, _, err = getU(it, attrEpoch)
	add(err)
	m.Partitions, err = getStrings(it, attrParts)
	add(err)
	m.Unproven, err = getStrings(it, attrUnprov)
	add(err)
	m.Cutover, err = getWatermark(it, attrCutKind, attrCut)
	add(err)
	m.Proven, err = getBool(it, attrProven)
	add(err)
	m.Reason, err = getS(it, attrReason)
	add(err)
	m.Repairs, err = getRepairs(it)
	add(err)
	switch v := it[attrLineage].(type) {
	case nil:
	case *types.AttributeValueMemberM:
		for c := range v.Value {
			ps, err := getStrings(v.Value, c)
			add(err)
			if len(ps) > 0 {
				if m.Parents == nil {
					m.Parents = make(map[string][]string, len(v.Value))
				}
				m.Parents[c] = ps
			}
		}
	default:
		add(fmt.Errorf("%w: attribute %s is not a map", errMalformed, attrLineage))
	}
	switch v := it[attrIncs].(type) {
	case nil:
	case *types.AttributeValueMemberM:
		m.Incarnations = make(map[string]uint64, len(v.Value))
		for p := range v.Value {
			e, _, err := getU(v.Value, p)
			add(err)
			m.Incarnations[p] = e
		}
	default:
		add(fmt.Errorf("%w: attribute %s is not a map", errMalformed, attrIncs))
	}
	if err := errors.Join(errs...); err != nil {
		return store.Membership{}, fmt.Errorf("dynamostore: membership of %s: %w", scope, err)
	}
	return m, nil
}

// decodeFrontier decodes a frontier record of one item, written before
// shards (published.go reads it whole).
func decodeFrontier(scope string, it item) (store.Frontier, error) {
	var errs []error
	add := func(e error) { errs = append(errs, e) }
	f := decodeFrontierFields(scope, it, add)
	switch v := it[attrVector].(type) {
	case nil:
	case *types.AttributeValueMemberM:
		if len(v.Value) > 0 {
			f.Vector = make(map[string]coord.Watermark, len(v.Value))
		}
		for p, e := range v.Value {
			m, ok := e.(*types.AttributeValueMemberM)
			if !ok {
				add(fmt.Errorf("%w: vector entry %s is not a map", errMalformed, p))
				continue
			}
			w, err := getWatermark(m.Value, attrEntryKind, attrEntryValue)
			add(err)
			f.Vector[p] = w
		}
	default:
		add(fmt.Errorf("%w: attribute %s is not a map", errMalformed, attrVector))
	}
	if err := errors.Join(errs...); err != nil {
		return store.Frontier{}, fmt.Errorf("dynamostore: frontier of %s: %w", scope, err)
	}
	return f, nil
}

// decodeFrontierFields decodes what a frontier record of one item and a
// sharded record's root share (epoch, version, scalar, held by, reason),
// passing each attribute's error to add.
func decodeFrontierFields(scope string, it item, add func(error)) store.Frontier {
	f := store.Frontier{Scope: scope}
	var err error
	f.Epoch, _, err = getU(it, attrEpoch)
	add(err)
	f.Version, _, err = getU(it, attrVersion)
	add(err)
	f.Scalar, err = getWatermark(it, attrWMKind, attrWM)
	add(err)
	f.HeldBy, err = getStrings(it, attrHeldBy)
	add(err)
	f.Reason, err = getS(it, attrReason)
	add(err)
	return f
}

// ItemSize is the size DynamoDB counts for an item against its 400 KB
// limit and for write units (1 per started KB): the UTF-8 length of each
// attribute name plus the size of its value (strings: UTF-8 bytes; binary:
// bytes; numbers: about one byte per two significant digits plus one; lists
// and maps: 3 bytes plus one per element plus the elements).
func ItemSize(it map[string]types.AttributeValue) int {
	n := 0
	for name, v := range it {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		return 3 + len(v.Value) + ItemSize(v.Value)
	}
	return 0
}

// numberSize follows DynamoDB's rule (as dynalite implements it): 1 byte
// plus one per two significant digits, plus one for a negative sign.
func numberSize(s string) int {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "-+")
	intPart, frac, _ := strings.Cut(s, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp := len(strings.TrimLeft(intPart, "0")) - 1
	digits = strings.TrimRight(digits, "0")
	d := len(digits)
	if d == 0 {
		return 1
	}
	n := 1 + (d+1)/2
	if d%2 == 0 && exp%2 == 0 {
		n++
	}
	if neg {
		n++
	}
	return n
}

// sortWitnesses orders witnesses by AttemptID byte-wise (DynamoDB orders
// sort keys by UTF-8 bytes already; dynalite by UTF-16 code units, which
// differs above U+FFFF).
func sortWitnesses(ws []reconcile.Witness) {
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].AttemptID < ws[j].AttemptID })
}
