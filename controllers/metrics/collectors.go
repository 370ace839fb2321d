package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/unitlet/unitlet/api/v1alpha1"
)

// Metric names; config/prometheus and config/grafana query these.
const (
	NameInstanceCondition = "unitlet_instance_condition"
	NameInstanceSuspended = "unitlet_instance_suspended"
	NameGenerations       = "unitlet_generations"
	NameStarts            = "unitlet_starts_total"
	NameStartDuration     = "unitlet_start_duration_seconds"
	NameKills             = "unitlet_kills_total"
	NameKillToEmpty       = "unitlet_kill_to_empty_seconds"
	NamePrepareStep       = "unitlet_prepare_step_seconds"
	NameSwapDuration      = "unitlet_swap_duration_seconds"
	NameDrainDuration     = "unitlet_drain_duration_seconds"
	NameWakeDuration      = "unitlet_wake_duration_seconds"
	NameRunDuration       = "unitlet_run_duration_seconds"
	NameAgentMode         = "unitlet_agent_mode"
	NameAgentInfo         = "unitlet_agent_info"
	NameLogLinesDropped   = "unitlet_log_lines_dropped_total"
)

// collectors are the metric vectors of one registry. The package's
// functions use one set registered on controller-runtime's registry;
// tests build their own on a private registry.
type collectors struct {
	instanceCondition *prometheus.GaugeVec
	instanceSuspended *prometheus.GaugeVec
	generations       *prometheus.GaugeVec
	starts            *prometheus.CounterVec
	startDuration     prometheus.Histogram
	kills             *prometheus.CounterVec
	killToEmpty       prometheus.Histogram
	prepareStep       *prometheus.HistogramVec
	swapDuration      *prometheus.HistogramVec
	drainDuration     *prometheus.HistogramVec
	wakeDuration      prometheus.Histogram
	runDuration       *prometheus.HistogramVec
	agentMode         *prometheus.GaugeVec
	agentInfo         *prometheus.GaugeVec
	logLinesDropped   *prometheus.CounterVec
}

// Buckets: starts, prepare steps and kills take milliseconds to tens of
// seconds (a stop timeout); a swap includes the successor's readiness and
// the old generation's drain, so it runs to minutes.
var (
	shortBuckets = prometheus.ExponentialBuckets(0.005, 2, 14) // 5ms .. ~41s
	swapBuckets  = prometheus.ExponentialBuckets(0.05, 2, 14)  // 50ms .. ~410s
)

func newCollectors() *collectors {
	return &collectors{
		instanceCondition: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: NameInstanceCondition,
			Help: "1 while an Instance's condition is away from its normal status (" + normalStatuses() +
				"), status being the one it has now; absent while it is normal or missing. A type not listed has its series whatever its status.",
		}, []string{"namespace", "name", "type", "status"}),
		instanceSuspended: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: NameInstanceSuspended,
			Help: "1 while an Instance is suspended or suspending (Ready's reason is Suspended), so alerts can leave it out; absent otherwise.",
		}, []string{"namespace", "name"}),
		generations: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: NameGenerations,
			Help: "Generations on this node by phase.",
		}, []string{"phase"}),
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: NameStarts,
			Help: "Start attempts by what is known of them afterwards.",
		}, []string{"outcome"}),
		startDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    NameStartDuration,
			Help:    "Time from asking for a start to knowing its outcome.",
			Buckets: shortBuckets,
		}),
		kills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: NameKills,
			Help: "Kills by proof (Proven: emptiness seen; Unproven) and reason.",
		}, []string{"proof", "reason"}),
		killToEmpty: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    NameKillToEmpty,
			Help:    "Time from a kill to its cgroup seen empty (proven kills only).",
			Buckets: shortBuckets,
		}),
		prepareStep: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    NamePrepareStep,
			Help:    "Duration of each step that prepares a Generation.",
			Buckets: shortBuckets,
		}, []string{"step"}),
		swapDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    NameSwapDuration,
			Help:    "Duration of a swap from one Generation to the next, by strategy and result.",
			Buckets: swapBuckets,
		}, []string{"strategy", "result"}),
		drainDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    NameDrainDuration,
			Help:    "Time from a swap's flip until the old Generation was stopped, by how the wait ended: DrainProven (nothing queued, no accepted connection open) or DrainLimit.",
			Buckets: shortBuckets,
		}, []string{"result"}),
		wakeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    NameWakeDuration,
			Help:    "Time from the connection that woke an idle Instance until a generation served it.",
			Buckets: shortBuckets,
		}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    NameRunDuration,
			Help:    "One-off commands (kubectl unitlet run) from request to proven end, by result: succeeded, failed (non-zero exit), interrupted (the caller went away), abandoned (it outlived its agent), notStarted, unproven.",
			Buckets: swapBuckets,
		}, []string{"result"}),
		agentMode: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: NameAgentMode,
			Help: "The agent's mode: 1 for the current one (joining or hosting), 0 for the others.",
		}, []string{"mode"}),
		agentInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: NameAgentInfo,
			Help: "Always 1; labels name the agent's node, version and unit backend.",
		}, []string{"node", "version", "backend"}),
		logLinesDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: NameLogLinesDropped,
			Help: "Lines of an Instance's output its log file could not take (the app was not blocked), by reason: NoSpace, Quota, WriteError.",
		}, []string{"namespace", "name", "reason"}),
	}
}

func (c *collectors) all() []prometheus.Collector {
	return []prometheus.Collector{
		c.instanceCondition, c.instanceSuspended, c.generations, c.starts, c.startDuration, c.kills,
		c.killToEmpty, c.prepareStep, c.swapDuration, c.drainDuration, c.wakeDuration, c.runDuration, c.agentMode, c.agentInfo,
		c.logLinesDropped,
	}
}

// normalStatuses names each Instance condition type's normal status, as
// "Ready=True, ...", for the help of unitlet_instance_condition.
func normalStatuses() string {
	var parts []string
	for _, t := range v1alpha1.InstanceConditionTypes() {
		normal, _ := v1alpha1.InstanceConditionNormal(t)
		parts = append(parts, t+"="+string(normal))
	}
	return strings.Join(parts, ", ")
}
