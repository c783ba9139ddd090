package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// The page of `ctxcompact replay --html`: one self-contained file (inline CSS and SVG,
// no script, nothing fetched) with the totals and a chart per trace.

//go:embed replay_page.html
var replayPageSource string

var replayPageTemplate = template.Must(template.New("replay").Parse(replayPageSource))

// Chart layout, in SVG user units.
const (
	chartWidth, chartHeight  = 960, 300
	chartLeft, chartRight    = 64, 888
	chartTop, chartBottom    = 14, 262
	chartTicks               = 5
	chartLabelGap, chartXGap = 6, 16
)

type replayPageData struct {
	Window                   int
	WindowText, TriggerText  string
	Uses                     string
	Config                   string
	Rows                     []replayPageRow
	Charts                   []replayChart
	Left, Right, Top, Bottom int
	LeftLabel, RightLabel    int
	XLabel                   int
}

type replayPageRow struct {
	Name, Requests, Compactions, Errors, Overflows, Peak, Billed, Paths, Asks, Needed, Recalled, SummaryRequests string
	Total                                                                                                        bool
}

type replayChart struct {
	Trace, Stats, Billed  string
	Requests, Compactions int
	Width, Height         int
	Size, Cost            string // polyline points
	Trigger, WindowY      string
	YTicks, CostTicks     []chartTick
	XTicks                []chartTick
	Marks, Overflows      []chartMark
}

type chartTick struct{ Pos, Label string }

type chartMark struct{ X, Y, Y2, Class, Title string }

// replayPage renders the page for results at window; config names the --config file,
// uses what counted as a use of a fact (--needed-uses).
func replayPage(results []*replayResult, window int, config, uses string) ([]byte, error) {
	d := replayPageData{
		Uses: neededUsesText(uses), Window: window, WindowText: groupDigits(int64(window)), TriggerText: groupDigits(int64(replayTrigger(window))),
		Config: config, Left: chartLeft, Right: chartRight, Top: chartTop, Bottom: chartBottom,
		LeftLabel: chartLeft - chartLabelGap, RightLabel: chartRight + chartLabelGap, XLabel: chartBottom + chartXGap,
	}
	for _, r := range results {
		d.Rows = append(d.Rows, pageRow(r.Trace, r, false))
		d.Charts = append(d.Charts, replayChartOf(r))
	}
	d.Rows = append(d.Rows, pageRow(replayTotalName(len(results)), replayTotals(results), true))
	var b bytes.Buffer
	if err := replayPageTemplate.Execute(&b, d); err != nil {
		return nil, fmt.Errorf("ctxcompact replay: writing the page: %w", err)
	}
	return b.Bytes(), nil
}

func pageRow(name string, r *replayResult, total bool) replayPageRow {
	return replayPageRow{
		Name: name, Requests: groupDigits(int64(r.Requests)), Compactions: fmt.Sprint(r.Compactions),
		Errors: fmt.Sprint(r.Errors), Overflows: fmt.Sprint(r.Overflows), Peak: groupDigits(int64(r.Peak)),
		Billed: groupDigits(r.Billed), Paths: fmt.Sprintf("%d/%d", r.Paths[0], r.Paths[1]),
		Asks: fmt.Sprintf("%d/%d", r.Asks[0], r.Asks[1]), Needed: groupDigits(int64(r.Needed)), Recalled: recalledText(r),
		SummaryRequests: groupDigits(int64(r.SummaryRequestTokens)),
		Total:           total,
	}
}

// replayChartOf lays out one trace's chart: request sizes and the trigger and window
// lines on the left axis, the cumulative cost on the right one, a request per step.
func replayChartOf(r *replayResult) replayChart {
	c := replayChart{
		Trace: r.Trace, Requests: r.Requests, Compactions: r.Compactions, Width: chartWidth, Height: chartHeight,
		Billed: groupDigits(r.Billed),
		Stats: fmt.Sprintf("%d messages, %d requests, %d compactions, %d errors, %d overflows; peak %s tokens; billed %s; paths %d/%d, asks %d/%d; needed later %s, recalled %s; summary requests %s tokens",
			r.Messages, r.Requests, r.Compactions, r.Errors, r.Overflows, groupDigits(int64(r.Peak)), groupDigits(r.Billed),
			r.Paths[0], r.Paths[1], r.Asks[0], r.Asks[1], groupDigits(int64(r.Needed)), recalledText(r), groupDigits(int64(r.SummaryRequestTokens))),
	}
	top := float64(r.Window)
	for _, t := range r.turns {
		top = max(top, float64(t.Before))
	}
	tokStep := niceStep(top / chartTicks)
	tokMax := tokStep * math.Ceil(top*1.04/tokStep)
	costMax := 1.0
	if n := len(r.turns); n > 0 && r.turns[n-1].Billed > 0 {
		costMax = r.turns[n-1].Billed
	}
	costStep := niceStep(costMax / chartTicks)
	costMax = costStep * math.Ceil(costMax/costStep)
	y := func(v, top float64) float64 { return chartBottom - v/top*(chartBottom-chartTop) }
	x := func(i int) float64 {
		if len(r.turns) <= 1 {
			return (chartLeft + chartRight) / 2
		}
		return chartLeft + float64(i)/float64(len(r.turns)-1)*(chartRight-chartLeft)
	}
	for v := 0.0; v <= tokMax+tokStep/2; v += tokStep {
		c.YTicks = append(c.YTicks, chartTick{coord(y(v, tokMax)), shortCount(v)})
	}
	for v := 0.0; v <= costMax+costStep/2; v += costStep {
		c.CostTicks = append(c.CostTicks, chartTick{coord(y(v, costMax)), shortCount(v)})
	}
	if n := len(r.turns); n > 0 {
		step := int(math.Max(1, niceStep(float64(n)/10)))
		for i := 0; i < n; i += step {
			c.XTicks = append(c.XTicks, chartTick{coord(x(i)), strconv.Itoa(i + 1)})
		}
	}
	c.Trigger, c.WindowY = coord(y(r.trigger, tokMax)), coord(y(float64(r.Window), tokMax))
	var size, cost strings.Builder
	for i, t := range r.turns {
		xi := coord(x(i))
		fmt.Fprintf(&size, "%s,%s ", xi, coord(y(float64(t.Tokens), tokMax)))
		fmt.Fprintf(&cost, "%s,%s ", xi, coord(y(t.Billed, costMax)))
		if t.Compacted || t.Failed {
			m := chartMark{X: xi, Y: coord(y(float64(t.Before), tokMax)), Y2: coord(y(float64(t.Tokens), tokMax)), Class: "compaction"}
			m.Title = fmt.Sprintf("request %d (message %d): compacted %s → %s tokens", i+1, t.At, groupDigits(int64(t.Before)), groupDigits(int64(t.Tokens)))
			if t.Failed {
				m.Class, m.Title = "compaction-failed", fmt.Sprintf("request %d (message %d): compaction failed at %s tokens", i+1, t.At, groupDigits(int64(t.Before)))
			}
			c.Marks = append(c.Marks, m)
		}
		if t.Tokens > r.Window {
			c.Overflows = append(c.Overflows, chartMark{X: xi, Y: coord(y(float64(t.Tokens), tokMax)),
				Title: fmt.Sprintf("request %d (message %d): %s tokens, above the window", i+1, t.At, groupDigits(int64(t.Tokens)))})
		}
	}
	c.Size, c.Cost = strings.TrimSpace(size.String()), strings.TrimSpace(cost.String())
	return c
}

// niceStep is the smallest of 1, 2 or 5 times a power of ten at least v.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// shortCount writes an axis label: 24K, 1.5M.
func shortCount(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "K"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
