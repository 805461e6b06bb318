package benchkit

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Series is one named line (X, Y) or one set of bars (Y per group).
type Series struct {
	Name string
	X, Y []float64
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
// in group j.
func BarPlot(path, title, yLabel string, groups []string, series []Series) error {
	p := newPlot(title, "", yLabel)
	n := len(series)
	width := vg.Points(min(40, 320/float64(max(1, n*len(groups)))))
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
	}
	p.NominalX(groups...)
	return p.Save(plotWidth, plotHeight, path)
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
