"""The Grafana dashboard's own queries, evaluated by the Prometheus that
`make demo` runs on the host (hack/demo.sh), for hack/demo/clickhouse.py.

The expressions are read from internal/monitoring/dashboard.json, the file the
operator puts into the cache's dashboard ConfigMap, and their template
variables are substituted as Grafana would for one cache with zone and tenant
at "All": the numbers printed are what the dashboard's panels show.

Standard library only.
"""

import json
import math
import os
import time
import urllib.error
import urllib.parse
import urllib.request

DASHBOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "internal", "monitoring",
                         "dashboard.json")

# Prometheus scrapes every second (hack/demo.sh); Grafana's $__rate_interval is
# max($__interval + scrape interval, 4 x scrape interval).
SCRAPE_SECONDS = 1
STEP_SECONDS = 1
RATE_SECONDS = max(STEP_SECONDS + SCRAPE_SECONDS, 4 * SCRAPE_SECONDS)


class Prometheus:
    def __init__(self, url):
        self.url = url.rstrip("/")

    def _get(self, path, **params):
        q = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{q}", timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:  # a bad query: Prometheus says why in the body
            body = json.load(e)
        if body.get("status") != "success":
            raise RuntimeError(f"prometheus {path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr, at=None):
        """The instant vector's samples as [(labels, value)]."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return [(s["metric"], float(s["value"][1])) for s in self._get("/api/v1/query", **params)["result"]]

    def query_range(self, expr, start, end, step):
        """{timestamp: value} of the expression's one series (empty if it has none)."""
        data = self._get("/api/v1/query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=str(step))
        out = {}
        for s in data["result"][:1]:
            out = {float(t): float(v) for t, v in s["values"]}
        return out

    def scalar(self, expr, at=None):
        r = self.query(expr, at)
        return r[0][1] if r else None

    def wait(self, what, check, timeout=60):
        """Polls check() (True when done) for up to timeout seconds."""
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except (OSError, RuntimeError) as e:
                last = e
            time.sleep(0.25)
        raise SystemExit(f"prometheus at {self.url}: timed out waiting for {what}" + (f" ({last})" if last else ""))

    def scraped_after(self, t, timeout=30):
        """Waits until every target has been scraped after time t; returns the
        earliest and the latest of their latest scrapes."""
        got = []

        def check():
            got[:] = [self.scalar("min(timestamp(up))"), self.scalar("max(timestamp(up))")]
            return None not in got and got[0] > t

        self.wait(f"a scrape of every target after {time.strftime('%H:%M:%S', time.localtime(t))}", check, timeout)
        return got[0], got[1]


# ---------------------------------------------------------------- the dashboard


def panels():
    with open(DASHBOARD) as f:
        d = json.load(f)
    out = {}
    for p in d["panels"]:
        out[(p.get("title"), p.get("type"))] = [(t.get("legendFormat", ""), t["expr"]) for t in p.get("targets", [])]
    all_values = {v["name"]: v.get("allValue", ".*") for v in d["templating"]["list"] if v.get("includeAll")}
    return out, all_values


def grafana(expr, variables):
    """Substitutes $name and ${name}, longest names first."""
    for k in sorted(variables, key=len, reverse=True):
        expr = expr.replace("${" + k + "}", variables[k]).replace("$" + k, variables[k])
    if "$" in expr:
        raise SystemExit(f"dashboard.py: a variable is left in {expr}")
    return expr


class Dashboard:
    """The panels of internal/monitoring/dashboard.json for one cache, zone
    and tenant at All."""

    def __init__(self, prom, namespace, cache):
        self.prom = prom
        self.panels, all_values = panels()
        self.vars = dict(all_values, namespace=namespace, cache=cache)

    def targets(self, title, kind):
        try:
            return self.panels[(title, kind)]
        except KeyError:
            raise SystemExit(f"dashboard.py: no {kind} panel {title!r} in {DASHBOARD}") from None

    def stat(self, title, at, time_range):
        """The stat panel's value at `at` for a dashboard time range (a
        Prometheus duration) ending then."""
        (_, expr), = self.targets(title, "stat")
        return self.prom.scalar(grafana(expr, dict(self.vars, __range=time_range)), at)

    def series(self, title, start, end, legend=None):
        """{legend: {t: value}} of the time series panel's targets (or of
        the one whose legend is `legend`), as Grafana draws them every
        STEP_SECONDS."""
        v = dict(self.vars, __rate_interval=f"{RATE_SECONDS}s", __interval=f"{STEP_SECONDS}s")
        return {lg: self.prom.query_range(grafana(expr, v), start, end, STEP_SECONDS)
                for lg, expr in self.targets(title, "timeseries") if legend is None or lg == legend}


def fmt(v, unit):
    if v is None or math.isnan(v):
        return "-"
    if unit == "%":
        return f"{100 * v:.1f}%"
    return f"{v / 2**20:.1f}"


def report(prom, namespace, cache, start, end, phases, say):
    """Prints the dashboard's hit ratios over [start, end] and its bytes by
    tier and hit ratios second by second, with what ran then (phases:
    [(name, t0, t1)]). start and end are scrapes (Prometheus.scraped_after)."""
    dash = Dashboard(prom, namespace, cache)
    millis = math.ceil((end - start) * 1000) + 1  # [end - range, end] holds the scrape at start
    byte_ratio = dash.stat("Byte hit ratio", end, f"{millis}ms")
    request_ratio = dash.stat("Request hit ratio", end, f"{millis}ms")
    say(f"   over the {millis / 1000:.0f}s of the runs through distcache (the stat panels, for that time range):")
    say(f"     Byte hit ratio     {fmt(byte_ratio, '%'):>7}")
    say(f"     Request hit ratio  {fmt(request_ratio, '%'):>7}")

    first = end - math.floor(end - start) // STEP_SECONDS * STEP_SECONDS  # a grid that ends at end
    tiers = dash.series("Bytes served by tier", first, end)
    hit = dash.series("Byte hit ratio", first, end, legend="all zones")["all zones"]
    pages = dash.series("Gateway page cache hit ratio", first, end, legend="all gateways")["all gateways"]
    say("   second by second: \"Bytes served by tier\" (MiB/s), \"Byte hit ratio\" and \"Gateway page cache")
    say(f"   hit ratio\", each a rate over the {RATE_SECONDS}s before (Grafana's $__rate_interval at a 1s scrape);")
    say("   -: no data (no series: the nodes have served nothing of that kind since they started)")
    names = list(tiers)
    short = {n: n.split(" (")[0] if n.startswith("Peer") else n for n in names}
    say("     " + f"{'time':>5}  " + "".join(f"{short[n]:>10}" for n in names) +
        f"{'byte hit':>10}{'gw pages':>10}  running")
    stamps = sorted(set().union(*(s.keys() for s in tiers.values()), hit.keys(), pages.keys()))
    for t in stamps:
        running = ", ".join(n for n, t0, t1 in phases if t0 < t and t1 > t - STEP_SECONDS)
        say("     " + f"{f'+{t - start:.0f}s':>5}  " +
            "".join(f"{fmt(tiers[n].get(t), 'MiB'):>10}" for n in names) +
            f"{fmt(hit.get(t), '%'):>10}{fmt(pages.get(t), '%'):>10}  {running}")
