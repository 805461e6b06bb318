package kubectlplugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// The documents -o json and -o yaml print.
type (
	StatusReport struct {
		Caches []CacheStatus `json:"caches"`
	}
	RingReport struct {
		Caches []CacheRing `json:"caches"`
	}
	TenantsReport struct {
		Tenants []TenantStatus `json:"tenants"`
	}
)

// print writes report as -o asks, or calls table.
func (o *options) print(report any, table func() error) error {
	switch o.output {
	case "json":
		b, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.Out, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(report)
		if err != nil {
			return err
		}
		_, err = o.Out.Write(b)
		return err
	}
	if table == nil {
		return nil
	}
	return table()
}

func printStatus(out io.Writer, caches []CacheStatus) error {
	for i, c := range caches {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "DistributedCache %s/%s", c.Namespace, c.Name)
		if c.OperatorVersion != "" {
			fmt.Fprintf(out, " (operator %s)", c.OperatorVersion)
		}
		fmt.Fprintf(out, ": %d replicas per zone, %d ready; ring epoch %d\n", c.Replicas, c.ReadyReplicas, c.RingEpoch)
		fmt.Fprintf(out, "Hit ratio since the nodes started: %s of chunk reads, %s of bytes read\n", percent(c.HitRatio), percent(c.ByteHitRatio))
		for _, w := range c.Warnings {
			fmt.Fprintf(out, "Warning: %s\n", w)
		}
		if len(c.Conditions) > 0 {
			fmt.Fprintln(out)
			w := printers.GetNewTabWriter(out)
			fmt.Fprintln(w, "CONDITION\tSTATUS\tREASON\tSINCE\tMESSAGE")
			for _, cond := range c.Conditions {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", cond.Type, cond.Status, cond.Reason, ago(cond.LastTransitionTime.Time), cond.Message)
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}

		fmt.Fprintln(out)
		w := printers.GetNewTabWriter(out)
		fmt.Fprintln(w, "ZONE\tSTATEFULSET\tREADY\tRING EPOCH\tPUBLISHED\tACTIVE\tDRAINING\tHIT RATIO\tREAD RAM\tREAD DISK\tREAD S3")
		for _, z := range c.Zones {
			epoch, published := fmt.Sprint(z.RingEpoch), ago(z.RingPublished.Time)
			if z.RingPublished == nil {
				published = "-"
			}
			if z.RingError != "" {
				epoch, published = "?", "-"
			}
			fmt.Fprintf(w, "%s\t%s\t%d/%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", z.Name, dash(z.StatefulSet), z.ReadyReplicas, z.Replicas,
				epoch, published, z.Active, z.Draining, percent(z.HitRatio),
				iec(z.ReadBytes.HitRAM), iec(z.ReadBytes.HitDisk), iec(z.ReadBytes.Miss))
		}
		if err := w.Flush(); err != nil {
			return err
		}

		fmt.Fprintln(out)
		w = printers.GetNewTabWriter(out)
		fmt.Fprintln(w, "NODE\tZONE\tRING\tPHASE\tREADY\tEPOCH\tHIT RATIO\tREAD RAM\tREAD DISK\tREAD S3\tRAM USED\tDISK USED\tCHUNKS\tVERSION")
		var problems []string
		for _, z := range c.Zones {
			if z.RingError != "" {
				problems = append(problems, fmt.Sprintf("zone %s: %s", z.Name, z.RingError))
			}
			for _, n := range z.Nodes {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%t\t", n.Name, z.Name, dash(n.Ring), n.Phase, n.Ready)
				m := n.Metrics
				if m == nil {
					fmt.Fprintln(w, "-\t-\t-\t-\t-\t-\t-\t-\t-")
					if n.MetricsError != "" {
						problems = append(problems, fmt.Sprintf("%s: %s", n.Name, n.MetricsError))
					}
					continue
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", m.RingEpoch, percent(n.HitRatio),
					iec(m.ReadBytes.HitRAM), iec(m.ReadBytes.HitDisk), iec(m.ReadBytes.Miss),
					used(m.Store.RAMBytes, m.Store.RAMCapacityBytes), used(m.Store.DiskUsageBytes, m.Store.DiskLimitBytes),
					m.Store.Chunks, dash(m.Version))
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		for _, p := range problems {
			fmt.Fprintf(out, "Warning: %s\n", p)
		}
	}
	return nil
}

func printRings(out io.Writer, caches []CacheRing) error {
	first := true
	for _, c := range caches {
		for _, z := range c.Zones {
			if !first {
				fmt.Fprintln(out)
			}
			first = false
			fmt.Fprintf(out, "DistributedCache %s/%s zone %s: ", c.Namespace, c.Name, z.Zone)
			if z.Error != "" {
				fmt.Fprintf(out, "no ring: %s\n", z.Error)
				continue
			}
			fmt.Fprintf(out, "ring epoch %d", z.Epoch)
			if z.Published != nil {
				fmt.Fprintf(out, ", published %s (%s ago)", z.Published.UTC().Format(time.RFC3339), ago(z.Published.Time))
			}
			fmt.Fprintf(out, "; %s, seed %d\n", z.Algorithm, z.Seed)
			if z.PreviousEpoch > 0 || z.MovedShare != nil {
				fmt.Fprintf(out, "Previous epoch %d (warm handoff)", z.PreviousEpoch)
				if z.MovedShare != nil {
					fmt.Fprintf(out, ": %s of chunks changed owner", percent(z.MovedShare))
				}
				fmt.Fprintln(out)
			}
			if z.Samples > 0 {
				fmt.Fprintf(out, "Sampled shares over %d chunk ids\n", z.Samples)
			}
			w := printers.GetNewTabWriter(out)
			fmt.Fprintln(w, "MEMBER\tORDINAL\tSTATE\tWEIGHT\tSHARE\tSAMPLED\tADDRESS")
			for _, m := range z.Members {
				sampled := percent(&m.SampledShare)
				if z.Samples == 0 {
					sampled = "-"
				}
				fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%s\t%s\t%s\n", m.Name, m.Ordinal, m.State, m.Weight, percent(&m.ExpectedShare), sampled, m.Address)
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

func printTenants(out io.Writer, tenants []TenantStatus) error {
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "NAMESPACE\tNAME\tCACHE\tBUCKETS\tQUOTA USED\tCERT EXPIRES\tENDPOINT\tGATEWAYS\tREADY")
	var problems []string
	for _, t := range tenants {
		quota := "-"
		switch {
		case t.Use != nil && t.QuotaBytes > 0:
			quota = fmt.Sprintf("%s/%s", iec(t.Use.MaxNodeBytes), iec(t.QuotaBytes))
		case t.Use != nil:
			quota = iec(t.Use.MaxNodeBytes) + " (no quota)"
		case t.QuotaBytes > 0:
			quota = "?/" + iec(t.QuotaBytes)
		}
		cert := "-"
		if t.CertificateNotAfter != nil {
			cert = "in " + until(t.CertificateNotAfter.Time)
			if t.CertificateSource == "status" {
				cert += " (status)"
			}
		}
		gateways := "-"
		if t.GatewayReplicas > 0 || t.Endpoint != "" {
			gateways = fmt.Sprintf("%d/%d", t.GatewayReady, t.GatewayReplicas)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Namespace, t.Name, t.Cache, strings.Join(t.Buckets, ","),
			quota, cert, dash(t.Endpoint), gateways, dash(t.Ready))
		if t.UseError != "" {
			problems = append(problems, fmt.Sprintf("%s/%s quota use: %s", t.Namespace, t.Name, t.UseError))
		}
		if t.CertificateError != "" {
			problems = append(problems, fmt.Sprintf("%s/%s certificate: %s", t.Namespace, t.Name, t.CertificateError))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintf(out, "Warning: %s\n", p)
	}
	return nil
}

func percent(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", *v*100)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// iec is n bytes with binary units, without a space so that a table's
// columns stay one word each ("1.5GiB").
func iec(n int64) string { return strings.Replace(humanize.IBytes(uint64(max(n, 0))), " ", "", 1) }

// used is "used/bound (percent)", or used alone without a bound.
func used(n, bound int64) string {
	if bound <= 0 {
		return iec(n)
	}
	return fmt.Sprintf("%s/%s (%.0f%%)", iec(n), iec(bound), float64(n)*100/float64(bound))
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(time.Since(t))
}

func until(t time.Time) string {
	d := time.Until(t)
	if d < 0 {
		return "expired " + duration.HumanDuration(-d) + " ago"
	}
	return duration.HumanDuration(d)
}
