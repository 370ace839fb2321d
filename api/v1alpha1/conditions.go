package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Condition types. Ready is positive; Reconciling and Stalled follow
// kstatus (abnormal-true); StartUncertain and KillUnproven are abnormal-true
// and drive Ready=False while they hold. InstanceConditionNormal says
// each Instance type's normal status.
const (
	ConditionReady          = "Ready"
	ConditionReconciling    = "Reconciling"
	ConditionStalled        = "Stalled"
	ConditionStartUncertain = "StartUncertain"
	ConditionKillUnproven   = "KillUnproven"

	// Generation conditions.
	ConditionPrepared   = "Prepared"
	ConditionStarted    = "Started"
	ConditionTerminated = "Terminated"
	// ConditionDrained: a generation superseded by a swap was left to
	// finish what its listener had queued and accepted before its stop.
	ConditionDrained = "Drained"

	// Enrollment conditions.
	ConditionGuardArmed = "GuardArmed"
	ConditionEnrolled   = "Enrolled"
	ConditionHosting    = "Hosting"
	// ConditionNodeLease: the agent's last renewal of its node's Lease
	// succeeded (True/LeaseRenewed) or failed (False/LeaseNotRenewed, the
	// API's error as message).
	ConditionNodeLease = "NodeLease"
	// ConditionDiskPressure: the file system of the agent's state root
	// (data dirs and log files) has less free than the agent's threshold.
	ConditionDiskPressure = "DiskPressure"

	// ConditionScheduled (Instance): the placement controller's word on
	// the node. True with ReasonBound (it chose spec.nodeName), ReasonPinned
	// (the user named it) or ReasonMoving (a move to spec.nodeName is under
	// way); False with ReasonUnschedulable, the message naming what did
	// not fit on each node.
	ConditionScheduled = "Scheduled"
)

// instanceNormal is the status of each Instance condition type when
// nothing needs anyone's attention, in InstanceStatus.Conditions' order:
// the one place its polarity is written down. (Reconciling and Stalled
// are removed rather than set False; False is still what they mean then.)
var instanceNormal = [...]struct {
	typ    string
	status metav1.ConditionStatus
}{
	{ConditionReady, metav1.ConditionTrue},
	{ConditionReconciling, metav1.ConditionFalse},
	{ConditionStalled, metav1.ConditionFalse},
	{ConditionStartUncertain, metav1.ConditionFalse},
	{ConditionKillUnproven, metav1.ConditionFalse},
	{ConditionScheduled, metav1.ConditionTrue},
}

// InstanceConditionTypes are the condition types an Instance's status
// carries, in InstanceStatus.Conditions' order.
func InstanceConditionTypes() []string {
	types := make([]string, len(instanceNormal))
	for i, n := range instanceNormal {
		types[i] = n.typ
	}
	return types
}

// InstanceConditionNormal is the status conditionType has on an Instance
// when nothing needs attention (Ready and Scheduled True, the others
// False); ok is false for a type Instances do not have.
func InstanceConditionNormal(conditionType string) (status metav1.ConditionStatus, ok bool) {
	for _, n := range instanceNormal {
		if n.typ == conditionType {
			return n.status, true
		}
	}
	return "", false
}

// Placement reasons.
const (
	ReasonBound         = "Bound"
	ReasonPinned        = "Pinned"
	ReasonMoving        = "Moving"
	ReasonUnschedulable = "Unschedulable"
	// ReasonNodeDraining: the Instance's node is cordoned and being
	// drained, and its moves are Never: it stays, listed by the drain.
	ReasonNodeDraining = "NodeDraining"
)

// Instance key reasons (Generation Prepared=False): the gate that holds
// a start until the Instance's key is read and is the one its
// predecessor ran with.
const (
	// ReasonInstanceKeyUnavailable: the key could not be read (not minted
	// yet, deleted, or unreadable).
	ReasonInstanceKeyUnavailable = "InstanceKeyUnavailable"
	// ReasonInstanceKeyMismatch: the key read is not the one this
	// generation was made with (changed outside a rotation).
	ReasonInstanceKeyMismatch = "InstanceKeyMismatch"
)

// Condition reasons: one CamelCase word each.
const (
	ReasonReconciled  = "Reconciled"
	ReasonProgressing = "Progressing"
	ReasonSwapping    = "Swapping"
	ReasonSuspended   = "Suspended"
	// ReasonIdle: an activated Instance sleeps, its socket held by the
	// agent (Ready=True); ReasonWaking: a connection woke it and a
	// generation is starting to answer it (Ready=False, Reconciling=True).
	ReasonIdle             = "Idle"
	ReasonWaking           = "Waking"
	ReasonSwapAborted      = "SwapAborted"
	ReasonSeedFailed       = "SeedFailed"
	ReasonReadinessTimeout = "ReadinessTimeout"
	ReasonFenced           = "Fenced"
	// ReasonHostInUse: another Instance in the cluster holds the
	// HostClaim of spec.host; this one starts nothing of that host.
	ReasonHostInUse = "HostInUse"
	// ReasonNoAgent: no agent enrolled the Instance's node
	// (Reconciling=True); ReasonNodeLost: the node's agent stopped
	// renewing its Lease (Ready=Unknown). Both are written by nodewatch.
	ReasonNoAgent  = "NoAgent"
	ReasonNodeLost = "NodeLost"
	// ReasonMetadataNotGranted: the template asks for the cloud metadata
	// service and no UserGrant of its user allows it (Stalled).
	ReasonMetadataNotGranted = "MetadataNotGranted"
	// ReasonUserNotGranted: no UserGrant grants the template's user to
	// the namespace on the node. ReasonRootNotAllowed: the granted user is
	// uid 0 and the grant is not one of root. ReasonUserNeverGranted: the
	// user's uid or a group is one no grant gives (gid 0, the socket
	// group, the agent's --app-ids). ReasonUnknownUser: the node has no
	// such user (said only once the user is granted). Nothing of the
	// Instance starts until that changes.
	ReasonUserNotGranted   = "UserNotGranted"
	ReasonRootNotAllowed   = "RootNotAllowed"
	ReasonUserNeverGranted = "UserNeverGranted"
	ReasonUnknownUser      = "UnknownUser"
	// ReasonReconcileFailed: a step of the reconcile failed (the message
	// says which and why, e.g. a full disk on the node); it is retried
	// with backoff (Reconciling=True).
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonExited: the serving generation's app ended on its own.
	ReasonExited = "Exited"
	// ReasonOOMKilled: the generation's app ended, and the kernel's OOM
	// killer killed in its cgroup (it reached its tier's memory limit);
	// the message says the limit and how many kills.
	ReasonOOMKilled = "OOMKilled"
	// ReasonRestarting: a successor with the same template replaces a
	// generation that exited; ReasonBackOff: it waits out the restart
	// backoff first.
	ReasonRestarting = "Restarting"
	ReasonBackOff    = "BackOff"

	// Generation preparation and readiness.
	ReasonPrepared       = "Prepared"
	ReasonEnvUnavailable = "EnvUnavailable"
	// ReasonPrepareFailed: the node could not prepare the generation (its
	// files, sockets or identity; the message says why); nothing was
	// started, and it is tried again with backoff.
	ReasonPrepareFailed  = "PrepareFailed"
	ReasonProbing        = "Probing"
	ReasonProbeSucceeded = "ProbeSucceeded"
	ReasonRetired        = "Retired"
	// ReasonStartUnresolved: a start whose outcome stayed unknown for the
	// readiness timeout is given up (retired and proven gone).
	ReasonStartUnresolved = "StartUnresolved"
	// ReasonCertain: every start's outcome is known (StartUncertain=False).
	ReasonCertain = "Certain"
	// ReasonDeleting: the Instance waits for its generations to be proven
	// gone and deleted before the finalizer goes.
	ReasonDeleting = "Deleting"

	// Start outcomes.
	ReasonRunning              = "Running"
	ReasonLaunchRefused        = "LaunchRefused"
	ReasonMayHaveRun           = "MayHaveRun"
	ReasonQueuedJobMayRun      = "QueuedJobMayRun"
	ReasonExitedBeforeObserved = "ExitedBeforeObserved"
	// ReasonExecFailed: the command could not be executed (missing on
	// the node or in the app's sandbox, not executable); the message has
	// the path, the error and, where the sandbox is the cause, why. The
	// app never ran; it is retried with the restart backoff.
	ReasonExecFailed = "ExecFailed"

	// Kill proofs.
	ReasonProven         = "Proven"
	ReasonCgroupNotEmpty = "CgroupNotEmpty"
	ReasonProofTimedOut  = "ProofTimedOut"
	ReasonNoDelegation   = "NoDelegation"
	// ReasonNodeRebooted: the node's boot ID changed since the agent
	// last ran, which proves every process of the old boot gone (on a
	// Generation's Terminated, Ready and Started).
	ReasonNodeRebooted = "NodeRebooted"

	// Drained: Unknown/Draining while the old generation still holds a
	// queued or accepted connection; True/DrainProven once the kernel
	// showed none; False/DrainLimit when the limit ended the wait.
	ReasonDraining    = "Draining"
	ReasonDrainProven = "DrainProven"
	ReasonDrainLimit  = "DrainLimit"

	// Enrollment. The Hosting condition's reason is the join stage
	// (AwaitingApproval, GuardNotArmed, Hosting, ApprovalRevoked,
	// GuardDisarmed, LeaseNotHeld).
	ReasonAwaitingApproval = "AwaitingApproval"
	ReasonGuardCheckFailed = "GuardCheckFailed"
	ReasonApproved         = "Approved"
	ReasonArmed            = "Armed"
	ReasonGuardNotArmed    = "GuardNotArmed"
	ReasonHosting          = "Hosting"
	ReasonApprovalRevoked  = "ApprovalRevoked"
	ReasonGuardDisarmed    = "GuardDisarmed"
	ReasonLeaseNotHeld     = "LeaseNotHeld"
	ReasonLeaseRenewed     = "LeaseRenewed"
	ReasonLeaseNotRenewed  = "LeaseNotRenewed"
	// DiskPressure: True/LowDiskSpace below the threshold, False/
	// EnoughDiskSpace above it, Unknown/DiskUnreadable when the state
	// root's file system could not be read.
	ReasonLowDiskSpace    = "LowDiskSpace"
	ReasonEnoughDiskSpace = "EnoughDiskSpace"
	ReasonDiskUnreadable  = "DiskUnreadable"
)

// Finalizer is the agent's hold on an object: it removes it only after
// every unit of the object is proven gone. Its value still says "lease",
// the word it was given first: renaming it would strand the finalizers
// stored on every existing object.
const Finalizer = "hosting.unitlet.dev/lease"

// AnnotationApprovedByPolicy on an Enrollment names the label selector
// the cluster side's approval policy (--approve-nodes) approved it for.
// The policy approves an Enrollment once: one that carries it and is not
// approved was withdrawn by an administrator, whose word stands. An agent
// may neither set, change nor remove it (policy
// unitlet-agent-node-scoped), or it could undo a withdrawal.
const AnnotationApprovedByPolicy = "hosting.unitlet.dev/approved-by-policy"

// AnnotationRotateKey on an Instance asks the cluster side to mint a new
// instance key when its value differs from the one the key was last
// minted for: an administrator's explicit act, which starts a new
// generation.
const AnnotationRotateKey = "hosting.unitlet.dev/rotate-key"

// AnnotationRetiredBecause on a Generation says why it was retired
// (Superseded, Suspended, SwapAborted, Exited, Idle, NodeRebooted, Moved).
const AnnotationRetiredBecause = "hosting.unitlet.dev/retired-because"

// RetiredSuspended: the Instance was suspended.
const RetiredSuspended = "Suspended"

// RetiredMoved: the Instance moved to another node and serves there; the
// cluster side retired this generation of the old node.
const RetiredMoved = "Moved"

// AnnotationMoveFrom on an Instance, valued with a node's name, asks the
// placement controller to move the Instance off that node (written by
// `kubectl unitlet drain`). It is honoured only while spec.nodeName is that
// node and placement.moves is Allowed, and removed by the move's write.
const AnnotationMoveFrom = "hosting.unitlet.dev/move-from"

// EnvInstanceKey is the environment variable every generation, seed and
// sidecar of an Instance gets its key in.
const EnvInstanceKey = "UNITLET_INSTANCE_KEY"

// LabelInstance names a Generation's Instance.
const LabelInstance = "hosting.unitlet.dev/instance"

// LabelHolderUID on a HostClaim is its holder's UID, so that an Instance
// finds every claim it holds (a former host's too) with one list.
const LabelHolderUID = "hosting.unitlet.dev/holder-uid"

// FieldNodeName is the selectable field an agent's cache filters its
// Instances and Generations by.
const FieldNodeName = "spec.nodeName"

// AwaitingAgent is Reconciling=True/Progressing as the cluster side
// writes it into a new Instance's first status (the key minter's, or
// placement's binding): a status without it, and without
// observedGeneration, reads as done to kstatus. The node's agent, reading
// it, writes nothing until generation 1 says something. done is what the
// writer did; LastTransitionTime is set here, for writers that patch the
// list as JSON.
func AwaitingAgent(generation int64, done string) metav1.Condition {
	return metav1.Condition{Type: ConditionReconciling, Status: metav1.ConditionTrue, Reason: ReasonProgressing,
		Message: done + "; waiting for the node's agent to start the app", ObservedGeneration: generation, LastTransitionTime: metav1.Now()}
}
