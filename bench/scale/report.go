package scale

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Report is a run's results and model, as written to scale.json.
type Report struct {
	Command  string       `json:"command"`
	Machine  string       `json:"machine"`
	Started  string       `json:"started"`
	Finished string       `json:"finished"`
	Prices   Prices       `json:"prices"`
	Options  string       `json:"options"`
	Results  []SizeResult `json:"results"`
	// Model is the per-request model fitted on the measured sizes:
	// idle requests/s by operation, and read and billable write units/s.
	Model       map[string]Linear `json:"model,omitempty"`
	ReadUnits   Linear            `json:"model_read_units"`
	WriteUnits  Linear            `json:"model_write_units"`
	Predictions []Prediction      `json:"predictions,omitempty"`
	// ModelNote says why there is no model.
	ModelNote string `json:"model_note,omitempty"`
	// FittedOn are the sizes the model was fitted on.
	FittedOn []int `json:"fitted_on,omitempty"`
}

// Prediction is the model at a size that was not measured.
type Prediction struct {
	Partitions int                `json:"partitions"`
	Instances  int                `json:"instances"`
	ByOp       map[string]float64 `json:"requests_per_s_by_op"`
	Total      Rates              `json:"total"`
	MonthlyUSD float64            `json:"monthly_usd"`
}

// measured are the results with an idle window.
func measured(rs []SizeResult) []SizeResult {
	var out []SizeResult
	for _, r := range rs {
		if r.Idle != nil {
			out = append(out, r)
		}
	}
	return out
}

// steady says whether a size's idle window measured idle upkeep: every
// event was read before it and no lease was lost in it.
func steady(r SizeResult) bool {
	return r.Idle != nil && (r.EventsRead == nil || r.EventsRead.Done) && r.Idle.LeasesLost == 0
}

// BuildModel fits the per-request model on the sizes that were steady in
// their idle window (all at the same number of instances) and predicts the
// other requested sizes.
func (rep *Report) BuildModel() {
	ms := measured(rep.Results)
	if len(ms) == 0 {
		return
	}
	var idle []SizeResult
	for _, m := range ms {
		if steady(m) {
			idle = append(idle, m)
		}
	}
	rep.Model, rep.Predictions = nil, nil
	rep.ReadUnits, rep.WriteUnits = Linear{}, Linear{}
	rep.ModelNote = ""
	if len(idle) == 0 {
		rep.ModelNote = "no model: no size was steady in its idle window (every event read before it, no lease lost in it), and a fit on start-up work or lease churn would predict nothing"
		return
	}
	ms = idle
	rep.FittedOn = nil
	for _, m := range ms {
		rep.FittedOn = append(rep.FittedOn, m.Partitions)
	}
	n := ms[0].Instances
	ps := make([]int, len(ms))
	for i, m := range ms {
		ps[i] = m.Partitions
	}
	ops := map[string]bool{}
	for _, m := range ms {
		for op := range m.Idle.ByOp {
			ops[op] = true
		}
	}
	rep.Model = map[string]Linear{}
	for op := range ops {
		ys := make([]float64, len(ms))
		for i, m := range ms {
			ys[i] = m.Idle.ByOp[op].Requests
		}
		rep.Model[op] = Fit(ps, ys, n)
	}
	rus, wus := make([]float64, len(ms)), make([]float64, len(ms))
	for i, m := range ms {
		rus[i] = m.Idle.Total.ReadUnits
		wus[i] = m.Idle.Total.BillableWriteUnits()
	}
	rep.ReadUnits, rep.WriteUnits = Fit(ps, rus, n), Fit(ps, wus, n)
	rep.Predictions = nil
	for _, r := range rep.Results {
		if steady(r) {
			continue
		}
		pr := Prediction{Partitions: r.Partitions, Instances: n, ByOp: map[string]float64{}}
		for op, l := range rep.Model {
			pr.ByOp[op] = l.At(r.Partitions, n)
			pr.Total.Requests += pr.ByOp[op]
		}
		pr.Total.ReadUnits = rep.ReadUnits.At(r.Partitions, n)
		pr.Total.WriteUnits = rep.WriteUnits.At(r.Partitions, n)
		pr.MonthlyUSD = MonthlyUSD(pr.Total, rep.Prices)
		rep.Predictions = append(rep.Predictions, pr)
	}
}

func f1(v float64) string {
	switch {
	case v >= 100:
		return fmtInt(int(math.Round(v)))
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func usd(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	// thousands separators
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return "$" + b.String()
}

func phaseCell(ph *Phase, what string) string {
	if ph == nil {
		return "—"
	}
	if ph.Done {
		return fmt.Sprintf("%.0f s", ph.Seconds)
	}
	return fmt.Sprintf("not %s after %.0f s %s", what, ph.Seconds, ownedList(ph.Owned))
}

// coldCell is the cold start's balance, with when every partition was
// first owned and how they were spread then.
func coldCell(r SizeResult) string {
	c := phaseCell(r.Cold, "balanced")
	if r.Cold == nil {
		return c
	}
	if a := r.ColdAllOwned; a != nil {
		return fmt.Sprintf("%s; all owned at %.0f s %s", c, a.Seconds, ownedList(a.Owned))
	}
	return c + "; never all owned"
}

func usageCell(us []InstanceUsage, f func(InstanceUsage) string) string {
	parts := make([]string, len(us))
	for i, u := range us {
		parts[i] = f(u)
	}
	return strings.Join(parts, " / ")
}

// Markdown renders the report: the summary table, the requests by
// operation, the model and the predictions.
func (rep *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured with `%s` (%s, %s to %s).\n\n", rep.Command, rep.Machine, rep.Started, rep.Finished)
	b.WriteString("| partitions | instances | idle DynamoDB requests/s | read units/s | write units/s | leases lost while idle | balanced after cold start | balanced after adding a 4th | takeover after kill -9 | RSS MiB per instance | CPU cores per instance | dynalite CPU | on-demand $/month |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Results {
		if r.Idle == nil {
			fmt.Fprintf(&b, "| %s | %d | %s | | | | %s | | | | | | |\n", fmtInt(r.Partitions), r.Instances, r.Status, coldCell(r))
			continue
		}
		id := r.Idle
		mark := ""
		if r.EventsRead != nil && !r.EventsRead.Done {
			mark = " †"
		}
		take := phaseCell(r.Takeover, "all owned")
		if r.Takeover != nil && r.Takeover.Done {
			take = fmt.Sprintf("%s (%s partitions)", take, fmtInt(r.Killed))
		}
		fmt.Fprintf(&b, "| %s | %d | %s (%s)%s | %s | %s | %.0f (%d log lines) | %s | %s | %s | %s | %s | %.2f | %s |\n",
			fmtInt(r.Partitions), r.Instances, f1(id.Total.Requests), topOps(id.ByOp, 3), mark, f1(id.Total.ReadUnits), f1(id.Total.BillableWriteUnits()),
			id.LeasesLost, id.LeaseLostLines,
			coldCell(r), phaseCell(r.AddOne, "balanced"), take,
			usageCell(id.Instances, func(u InstanceUsage) string { return fmt.Sprintf("%.0f", u.RSSMiB) }),
			usageCell(id.Instances, func(u InstanceUsage) string { return fmt.Sprintf("%.3f", u.CPUCores) }),
			id.DynaliteCores, usd(id.MonthlyUSD))
	}
	marked := false
	for _, r := range rep.Results {
		marked = marked || (r.Idle != nil && r.EventsRead != nil && !r.EventsRead.Done)
	}
	for _, pr := range rep.Predictions {
		fmt.Fprintf(&b, "| %s | %d | model: %s (%s) | %s | %s | | | | | | | | model: %s |\n",
			fmtInt(pr.Partitions), pr.Instances, f1(pr.Total.Requests), topPredicted(pr.ByOp, 3), f1(pr.Total.ReadUnits), f1(pr.Total.WriteUnits), usd(pr.MonthlyUSD))
	}
	if marked {
		b.WriteString("\n† The idle window began before every event was read (the cold start had not finished within its timeout): these rates include start-up work (checkpoint creation, claims, first pages), not only idle upkeep.\n")
	}
	ms := measured(rep.Results)
	if len(ms) > 0 {
		b.WriteString("\nIdle requests/s by operation (items/s; capacity units/s as dynalite reports them; refused conditional writes/s):\n\n")
		b.WriteString("| operation |")
		for _, m := range ms {
			fmt.Fprintf(&b, " %s partitions |", fmtInt(m.Partitions))
		}
		b.WriteString("\n|---|")
		for range ms {
			b.WriteString("---|")
		}
		b.WriteString("\n")
		ops := map[string]bool{}
		for _, m := range ms {
			for op := range m.Idle.ByOp {
				ops[op] = true
			}
		}
		for _, op := range slices.Sorted(maps.Keys(ops)) {
			fmt.Fprintf(&b, "| %s |", op)
			for _, m := range ms {
				r, ok := m.Idle.ByOp[op]
				if !ok {
					b.WriteString(" 0 |")
					continue
				}
				u := r.WriteUnits
				kind := "WU"
				if IsRead(op) {
					u, kind = r.ReadUnits, "RU"
				}
				fmt.Fprintf(&b, " %s (%s items, %s %s", f1(r.Requests), f1(r.Items), f1(u), kind)
				if r.RefusedWrites > 0 {
					fmt.Fprintf(&b, ", %s refused", f1(r.RefusedWrites))
				}
				b.WriteString(") |")
			}
			b.WriteString("\n")
		}
	}
	if rep.ModelNote != "" {
		fmt.Fprintf(&b, "\nModel: %s.\n", rep.ModelNote)
	}
	if len(rep.Model) > 0 {
		fitted := make([]string, len(rep.FittedOn))
		for i, p := range rep.FittedOn {
			fitted[i] = fmtInt(p)
		}
		fmt.Fprintf(&b, "\nModel (idle figure = a·partitions + b·instances, fitted on the sizes steady in their idle window — every event read before it, no lease lost in it: %s partitions", strings.Join(fitted, ", "))
		if rep.ReadUnits.Points == 1 {
			b.WriteString("; one size used, so every figure is taken as proportional to the partitions, b = 0")
		}
		b.WriteString("):\n\n| figure | a (per partition) | b (per instance) |\n|---|---|---|\n")
		for _, op := range slices.Sorted(maps.Keys(rep.Model)) {
			l := rep.Model[op]
			fmt.Fprintf(&b, "| %s requests/s | %.4g | %.4g |\n", op, l.PerPartition, l.PerInstance)
		}
		fmt.Fprintf(&b, "| read units/s | %.4g | %.4g |\n", rep.ReadUnits.PerPartition, rep.ReadUnits.PerInstance)
		fmt.Fprintf(&b, "| write units/s (incl. refused writes) | %.4g | %.4g |\n", rep.WriteUnits.PerPartition, rep.WriteUnits.PerInstance)
	}
	fmt.Fprintf(&b, "\nMonthly estimate: idle units/s × %d s (730 h) at an assumed on-demand price of $%.3g per million write request units and $%.3g per million read request units; no storage, no free tier.\n",
		SecondsPerMonth, rep.Prices.WritePerMillion, rep.Prices.ReadPerMillion)
	for _, r := range rep.Results {
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "\n%s partitions: %s\n", fmtInt(r.Partitions), n)
		}
		if strings.HasPrefix(r.Status, "failed") {
			fmt.Fprintf(&b, "\n%s partitions %s\n", fmtInt(r.Partitions), "— "+strings.ReplaceAll(r.Status, "\n", "\n    "))
		}
	}
	fmt.Fprintf(&b, "\nOptions: %s\n", rep.Options)
	return b.String()
}

func fmtInt(n int) string { return strings.TrimPrefix(usd(float64(n)), "$") }

// topOps names the k operations with the most requests: "UpdateItem 333,
// BatchGetItem 40".
func topOps(by map[string]Rates, k int) string {
	m := map[string]float64{}
	for op, r := range by {
		m[op] = r.Requests
	}
	return topPredicted(m, k)
}

func topPredicted(by map[string]float64, k int) string {
	ops := slices.Collect(maps.Keys(by))
	slices.SortFunc(ops, func(a, b string) int {
		switch {
		case by[a] > by[b]:
			return -1
		case by[a] < by[b]:
			return 1
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, op := range ops {
		if len(parts) == k || by[op] < 0.005 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %s", op, f1(by[op])))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
