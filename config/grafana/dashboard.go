// Package grafana builds the unitlet dashboard with Grafana's foundation
// SDK. unitlet-agent.json is its output (go generate ./config/grafana);
// a test fails when the committed file is stale.
package grafana

//go:generate go run ./gen

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// File is the generated dashboard, relative to this directory.
const File = "unitlet-agent.json"

// UID is the dashboard's stable uid, so links and provisioning survive
// regeneration.
const UID = "unitlet-agent"

// ds is the dashboard's Prometheus data source variable.
var ds = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// sel is the node filter every query carries.
const sel = `node=~"$node"`

// JSON is the dashboard as Grafana imports it, indented, with a final
// newline.
func JSON() ([]byte, error) {
	d, err := Dashboard().Build()
	if err != nil {
		return nil, fmt.Errorf("build dashboard: %w", err)
	}
	numberPanels(&d)
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal dashboard: %w", err)
	}
	return append(out, '\n'), nil
}

// Dashboard is the builder of the unitlet dashboard.
func Dashboard() *dashboard.DashboardBuilder {
	b := overview()
	usage(b)
	lifecycle(b)
	return b
}

// overview is the dashboard with its variables and the rows of nodes,
// Instances, starts and kills, and latency.
func overview() *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder("unitlet agents").
		Uid(UID).
		Description("Nodes, Instances by condition, start outcomes, unproven kills, latencies, usage per Instance, drains, wakes and runs, from the unitlet agents' metrics.").
		Tags([]string{"unitlet"}).
		Refresh("30s").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("node").
			Label("Node").
			Datasource(ds).
			Query(dashboard.StringOrMap{String: cog.ToPtr("label_values(unitlet_agent_info, node)")}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Multi(true).
			IncludeAll(true).
			AllValue(".*")).
		WithRow(dashboard.NewRowBuilder("Nodes")).
		WithPanel(statPanel("Agents", "Agents reporting their info.",
			`count(unitlet_agent_info{`+sel+`}) or vector(0)`)).
		WithPanel(statPanel("Joining", "Agents not yet hosting: their Enrollment is pending or its guard fails.",
			`sum(unitlet_agent_mode{mode="joining",`+sel+`}) or vector(0)`)).
		WithPanel(statPanel("Agents down", "Scrape targets of job unitlet-agent that do not answer.",
			`count(up{job="unitlet-agent"} == 0) or vector(0)`)).
		WithPanel(statPanel("Instances with KillUnproven", "Instances whose retired processes may still run.",
			`count(unitlet_instance_condition{type="KillUnproven",status="True",`+sel+`} == 1) or vector(0)`)).
		WithPanel(series("Agents by mode", "", "short",
			query(`sum by (mode) (unitlet_agent_mode{`+sel+`})`, "{{mode}}")).Span(12)).
		WithPanel(series("Agents by version and backend", "", "short",
			query(`count by (version, backend) (unitlet_agent_info{`+sel+`})`, "{{version}} {{backend}}")).Span(12)).
		WithRow(dashboard.NewRowBuilder("Instances")).
		WithPanel(series("Instances by condition", "Instances with a condition away from its normal status (Ready or Scheduled not True; Reconciling, Stalled, StartUncertain or KillUnproven not False), by type and status. A settled Instance counts nowhere: its conditions have no series.", "short",
			query(`sum by (type, status) (unitlet_instance_condition{`+sel+`})`, "{{type}}={{status}}"))).
		WithPanel(series("Instances not Ready", "Instances whose Ready is False or Unknown (suspended ones too), by node.", "short",
			query(notReadyByNode, "{{node}}"))).
		WithPanel(series("Generations by phase", "", "short",
			query(`sum by (phase) (unitlet_generations{`+sel+`})`, "{{phase}}"))).
		WithRow(dashboard.NewRowBuilder("Starts and kills")).
		WithPanel(series("Starts by outcome", "Start attempts per interval; anything but Running and NotStarted leaves a doubt.", "short",
			query(`sum by (outcome) (increase(unitlet_starts_total{`+sel+`}[$__rate_interval]))`, "{{outcome}}"))).
		WithPanel(series("Unproven kills by reason", "Kills whose emptiness was not seen, per interval.", "short",
			query(`sum by (reason) (increase(unitlet_kills_total{proof="Unproven",`+sel+`}[$__rate_interval]))`, "{{reason}}"))).
		WithPanel(series("Kills by proof", "", "short",
			query(`sum by (proof) (increase(unitlet_kills_total{`+sel+`}[$__rate_interval]))`, "{{proof}}"))).
		WithRow(dashboard.NewRowBuilder("Latency")).
		WithPanel(series("Start latency", "From asking for a start to knowing its outcome.", "s",
			quantiles("unitlet_start_duration_seconds", "")...).Span(12)).
		WithPanel(series("Swap duration (p95)", "From the swap's start to the old generation retired.", "s",
			query(p95("unitlet_swap_duration_seconds", "strategy, result"), "{{strategy}} {{result}}")).Span(12)).
		WithPanel(series("Kill to empty", "Proven kills: from the kill to the cgroup seen empty.", "s",
			quantiles("unitlet_kill_to_empty_seconds", "")...).Span(12)).
		WithPanel(series("Prepare steps (p95)", "", "s",
			query(p95("unitlet_prepare_step_seconds", "step"), "{{step}}")).Span(12))
}

// notReadyByNode counts Ready's series, which exist only while it is not
// True (status dropped: for a moment a change from False to Unknown has
// both); every agent's node is 0 rather than missing when all are Ready.
const notReadyByNode = `count by (node) (max without (status) (unitlet_instance_condition{type="Ready",` + sel + `}))` +
	` or on (node) 0 * group by (node) (unitlet_agent_info{` + sel + `})`

// perInstance sums a per-Instance series over the nodes it is on (an
// Instance being moved has generations on two).
func perInstance(expr string) string { return "sum by (namespace, name) (" + expr + ")" }

// usage is the row of what each Instance uses, read from its generations'
// cgroups, against its tier's memory limit.
func usage(b *dashboard.DashboardBuilder) {
	const legend = "{{namespace}}/{{name}}"
	ws := perInstance(`unitlet_instance_memory_working_set_bytes{` + sel + `}`)
	limit := perInstance(`unitlet_instance_spec_memory_limit_bytes{` + sel + `}`)
	b.WithRow(dashboard.NewRowBuilder("Usage per Instance")).
		WithPanel(series("Memory working set", "Memory in use less inactive file cache (cAdvisor's working set); \"limit\": the tier's memory limit.", "bytes",
			query(ws, legend), query(limit, legend+" limit")).Span(12)).
		WithPanel(series("Memory working set of the limit", "Near 100% the kernel OOM-kills the app (the generation's reason is then OOMKilled).", "percentunit",
			query(ws+" / "+limit, legend)).Span(12)).
		WithPanel(series("CPU", "CPU time used per second (cores).", "short",
			query(perInstance(`rate(unitlet_instance_cpu_usage_seconds_total{`+sel+`}[$__rate_interval])`), legend)).Span(12)).
		WithPanel(series("OOM kills", "Processes the kernel killed for memory in the Instance's cgroups, per interval.", "short",
			query(perInstance(`increase(unitlet_instance_oom_events_total{`+sel+`}[$__rate_interval])`), legend)).Span(12))
}

// lifecycle is the row of drains, wakes and one-off runs.
func lifecycle(b *dashboard.DashboardBuilder) {
	b.WithRow(dashboard.NewRowBuilder("Drains, wakes and runs")).
		WithPanel(series("Drain duration (p95)", "From a swap's flip until the old generation was stopped, by how the wait ended (DrainProven, DrainLimit).", "s",
			query(p95("unitlet_drain_duration_seconds", "result"), "{{result}}")).Span(12)).
		WithPanel(series("Wake latency", "From the connection that woke an idle Instance until a generation served it.", "s",
			quantiles("unitlet_wake_duration_seconds", "")...).Span(12)).
		WithPanel(series("Runs by result", "kubectl unitlet run, per interval, by result.", "short",
			query(`sum by (result) (increase(unitlet_run_duration_seconds_count{`+sel+`}[$__rate_interval]))`, "{{result}}")).Span(12)).
		WithPanel(series("Run duration (p95)", "From request to proven end, by result.", "s",
			query(p95("unitlet_run_duration_seconds", "result"), "{{result}}")).Span(12))
}

func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).LegendFormat(legend).Datasource(ds)
}

// p95 is the 95th percentile of histogram name, kept apart by the labels in by.
func p95(name, by string) string { return quantile("0.95", name, by) }

func quantile(q, name, by string) string {
	le := "le"
	if by != "" {
		le = "le, " + by
	}
	return fmt.Sprintf(`histogram_quantile(%s, sum by (%s) (rate(%s_bucket{%s}[$__rate_interval])))`, q, le, name, sel)
}

func quantiles(name, by string) []*prometheus.DataqueryBuilder {
	var qs []*prometheus.DataqueryBuilder
	for _, q := range []string{"0.5", "0.95", "0.99"} {
		qs = append(qs, query(quantile(q, name, by), "p"+q[2:]))
	}
	return qs
}

func series(title, description, unit string, targets ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Unit(unit).Min(0).Datasource(ds).Height(8).Span(8)
	if description != "" {
		p = p.Description(description)
	}
	for _, t := range targets {
		p = p.WithTarget(t)
	}
	return p
}

func statPanel(title, description, expr string) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(description).Datasource(ds).
		Height(4).Span(6).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		WithTarget(query(expr, "").Instant())
}

// numberPanels gives every panel and row a distinct id in layout order:
// the SDK leaves rows at 0, and Grafana keys panel links and state by id.
func numberPanels(d *dashboard.Dashboard) {
	for i := range d.Panels {
		id := uint32(i + 1)
		switch p := d.Panels[i]; {
		case p.Panel != nil:
			p.Panel.Id = &id
		case p.RowPanel != nil:
			p.RowPanel.Id = id
		}
	}
}
