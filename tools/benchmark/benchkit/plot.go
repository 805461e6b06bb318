package benchkit

import (
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one named line (X, Y) or one set of bars (Y per group; for
// bars measured several times, Low and High are each group's fastest and
// slowest, drawn as a whisker).
type Series struct {
	Name      string
	X, Y      []float64
	Low, High []float64
}

const (
	plotWidth  = 8 * vg.Inch
	plotHeight = 4.5 * vg.Inch
)

// LinePlot writes a PNG with one line (with points) per series.
func LinePlot(path, title, xLabel, yLabel string, series []Series) error {
	p := newPlot(title, xLabel, yLabel)
	for i, s := range series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("plot %s: series %q has %d x and %d y values", path, s.Name, len(s.X), len(s.Y))
		}
		pts := make(plotter.XYs, len(s.X))
		for j := range s.X {
			pts[j].X, pts[j].Y = s.X[j], s.Y[j]
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(s.Name, line, points)
	}
	return p.Save(plotWidth, plotHeight, path)
}

// BarPlot writes a PNG of grouped bars: series[i].Y[j] is the bar of series i
// in group j, with a whisker from Low[j] to High[j] when the series has them.
func BarPlot(path, title, yLabel string, groups []string, series []Series) error {
	p := newPlot(title, "", yLabel)
	n := len(series)
	width := vg.Points(min(40, 320/float64(max(1, n*len(groups)))))
	var top float64
	for i, s := range series {
		if len(s.Y) != len(groups) {
			return fmt.Errorf("plot %s: series %q has %d values for %d groups", path, s.Name, len(s.Y), len(groups))
		}
		bars, err := plotter.NewBarChart(plotter.Values(s.Y), width)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = width * vg.Length(float64(i)-float64(n-1)/2)
		p.Add(bars)
		p.Legend.Add(s.Name, bars)
		top = max(top, slices.Max(s.Y))
		if s.Low == nil && s.High == nil {
			continue
		}
		if len(s.Low) != len(groups) || len(s.High) != len(groups) {
			return fmt.Errorf("plot %s: series %q has %d low and %d high values for %d groups", path, s.Name, len(s.Low), len(s.High), len(groups))
		}
		p.Add(whiskers{low: s.Low, high: s.High, offset: bars.Offset, cap: width / 4})
		top = max(top, slices.Max(s.High))
	}
	p.NominalX(groups...)
	// Room above the tallest bar for the legend, which sits top right.
	p.Y.Min, p.Y.Max = 0, top*(1+0.06*float64(n+1))
	return p.Save(plotWidth, plotHeight, path)
}

// whiskers draws a vertical line from low[j] to high[j] through the middle
// of bar j of one series (offset from its group's centre, as the bars are).
type whiskers struct {
	low, high   []float64
	offset, cap vg.Length
}

func (w whiskers) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	style := draw.LineStyle{Color: color.Black, Width: vg.Points(1)}
	for j := range w.low {
		x := trX(float64(j)) + w.offset
		lo, hi := trY(w.low[j]), trY(w.high[j])
		c.StrokeLine2(style, x, lo, x, hi)
		c.StrokeLine2(style, x-w.cap, lo, x+w.cap, lo)
		c.StrokeLine2(style, x-w.cap, hi, x+w.cap, hi)
	}
}

func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}
