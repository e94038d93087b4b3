package scale

import "math"

// Prices are on-demand DynamoDB prices in USD per million request units.
// They are assumptions (flags of the command), not read from anywhere.
type Prices struct {
	WritePerMillion float64 `json:"write_per_million"`
	ReadPerMillion  float64 `json:"read_per_million"`
}

// DefaultPrices are the harness's assumption: 0.625 USD per million write
// request units and 0.125 USD per million read request units (on-demand,
// one region, no free tier, no storage, no reserved capacity).
var DefaultPrices = Prices{WritePerMillion: 0.625, ReadPerMillion: 0.125}

// SecondsPerMonth is the month of the estimate: 730 hours.
const SecondsPerMonth = 730 * 3600

// Rates are per-second figures of one window.
type Rates struct {
	Requests   float64 `json:"requests_per_s"`
	ReadUnits  float64 `json:"read_units_per_s"`
	WriteUnits float64 `json:"write_units_per_s"`
	// RefusedWrites are refused conditional writes per second; DynamoDB
	// charges them like a write of the item (counted as 1 unit each in
	// BillableWriteUnits: the items here are under 1 KB).
	RefusedWrites float64 `json:"refused_writes_per_s"`
	Items         float64 `json:"items_per_s"`
}

// BillableWriteUnits are the write units a month is charged for: the
// reported ones plus one per refused conditional write.
func (r Rates) BillableWriteUnits() float64 { return r.WriteUnits + r.RefusedWrites }

// RatesOf divides counts over a window of secs seconds.
func RatesOf(c OpCount, secs float64) Rates {
	if secs <= 0 {
		return Rates{}
	}
	return Rates{
		Requests:      float64(c.Requests) / secs,
		ReadUnits:     c.ReadUnits / secs,
		WriteUnits:    c.WriteUnits / secs,
		RefusedWrites: float64(c.CondFailures) / secs,
		Items:         float64(c.Items) / secs,
	}
}

// MonthlyUSD is the on-demand cost of a month at these rates.
func MonthlyUSD(r Rates, p Prices) float64 {
	return SecondsPerMonth * (r.BillableWriteUnits()*p.WritePerMillion + r.ReadUnits*p.ReadPerMillion) / 1e6
}

// Linear is the per-request model of one figure: y = PerPartition*P +
// PerInstance*instances, fitted at a fixed number of instances.
type Linear struct {
	PerPartition float64 `json:"per_partition"`
	PerInstance  float64 `json:"per_instance"`
	// Points is how many measured sizes the fit used; with one, the
	// figure is taken as proportional to P (PerInstance 0).
	Points int `json:"points"`
}

// At evaluates the model at p partitions and n instances.
func (l Linear) At(p, n int) float64 { return l.PerPartition*float64(p) + l.PerInstance*float64(n) }

// Fit fits y = a*P + b by least squares over the points (P, y) measured with
// n instances, and reports b as b/n per instance. With a single point (or
// every point at one P) it assumes b = 0. Negative coefficients are clamped
// to 0 and the other refitted: a cost does not fall as P grows.
func Fit(ps []int, ys []float64, n int) Linear {
	if len(ps) == 0 || len(ps) != len(ys) || n <= 0 {
		return Linear{}
	}
	var sx, sy, sxx, sxy float64
	for i, p := range ps {
		x := float64(p)
		sx += x
		sy += ys[i]
		sxx += x * x
		sxy += x * ys[i]
	}
	k := float64(len(ps))
	proportional := func() Linear {
		if sxx == 0 {
			return Linear{Points: len(ps)}
		}
		return Linear{PerPartition: math.Max(sxy/sxx, 0), Points: len(ps)}
	}
	den := k*sxx - sx*sx
	if len(ps) == 1 || math.Abs(den) < 1e-9 {
		return proportional()
	}
	a := (k*sxy - sx*sy) / den
	b := (sy - a*sx) / k
	switch {
	case a < 0:
		return Linear{PerInstance: math.Max(sy/k, 0) / float64(n), Points: len(ps)}
	case b < 0:
		return proportional()
	}
	return Linear{PerPartition: a, PerInstance: b / float64(n), Points: len(ps)}
}
