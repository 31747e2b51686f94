package temporalauth

import (
	"slices"

	"go.temporal.io/server/common/api"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"kedge.dev/kedge/internal/mtls"
)

// class is what a call does, which decides who may make it.
type class int

const (
	// adminOnly: not in the table, or kept for admin and system (namespaces,
	// search attributes, deletion of history, task routing, Nexus, the
	// admin service, calls Kedge does not use).
	adminOnly class = iota
	// open: health checks, to every certificate.
	open
	// read: reads, to every role.
	read
	// operate: changes to runs and schedules, to operators.
	operate
	// work: answers to workflow tasks (what a run does next), to
	// workers.
	work
	// answer: answers to activity tasks, and a worker process's own
	// lifecycle, to workers and sites.
	answer
	// poll: a worker's polls, on the task queues its certificate names
	// (a site's: activity tasks only).
	poll
)

// allowed are the classes each role may call (admin and system: all).
var allowed = map[mtls.Role][]class{
	mtls.RoleViewer:   {open, read},
	mtls.RoleOperator: {open, read, operate},
	mtls.RoleWorker:   {open, read, work, answer, poll},
	mtls.RoleSite:     {open, read, answer, poll},
}

// workflowService classifies the WorkflowService calls of the Temporal API
// go.mod pins. A call missing here is adminOnly: TestEveryCallIsClassified
// lists every call of the API, so an upgrade that adds one fails until it
// is placed here (or in keptForAdmin).
var workflowService = map[string]class{
	"GetSystemInfo": open, // the SDK's first call on dialing

	// Reads: the Web UI's pages, `kedge list|status|watch`, the SDK's
	// history pages, chat.follow.
	"DescribeNamespace":                  read,
	"ListNamespaces":                     read,
	"GetClusterInfo":                     read,
	"GetSearchAttributes":                read,
	"GetWorkflowExecutionHistory":        read,
	"GetWorkflowExecutionHistoryReverse": read,
	"ListOpenWorkflowExecutions":         read,
	"ListClosedWorkflowExecutions":       read,
	"ListWorkflowExecutions":             read,
	"ListArchivedWorkflowExecutions":     read,
	"ScanWorkflowExecutions":             read,
	"CountWorkflowExecutions":            read,
	"DescribeWorkflowExecution":          read,
	"QueryWorkflow":                      read, // Kedge's progress query and the UI's stack trace: handlers cannot change a run
	"PollWorkflowExecutionUpdate":        read, // waits for an update's outcome; makes none
	"DescribeTaskQueue":                  read,
	"ListTaskQueuePartitions":            read,
	"DescribeSchedule":                   read,
	"ListSchedules":                      read,
	"CountSchedules":                     read,
	"ListScheduleMatchingTimes":          read,
	"DescribeBatchOperation":             read,
	"ListBatchOperations":                read,
	"GetWorkerBuildIdCompatibility":      read,
	"GetWorkerVersioningRules":           read,
	"GetWorkerTaskReachability":          read,
	"DescribeDeployment":                 read,
	"ListDeployments":                    read,
	"GetDeploymentReachability":          read,
	"GetCurrentDeployment":               read,
	"DescribeWorkerDeployment":           read,
	"DescribeWorkerDeploymentVersion":    read,
	"ListWorkerDeployments":              read,
	"ListWorkers":                        read,
	"CountWorkers":                       read,
	"DescribeWorker":                     read,
	"FetchWorkerConfig":                  read,
	"DescribeWorkflowRule":               read,
	"ListWorkflowRules":                  read,

	// Changes to runs: `kedge run|approve|cancel|reset|schedule`, the
	// webhook, the Web UI's buttons for an operator.
	"StartWorkflowExecution":           operate,
	"SignalWithStartWorkflowExecution": operate,
	"ExecuteMultiOperation":            operate, // update-with-start
	"SignalWorkflowExecution":          operate,
	"UpdateWorkflowExecution":          operate,
	"RequestCancelWorkflowExecution":   operate,
	"TerminateWorkflowExecution":       operate,
	"ResetWorkflowExecution":           operate,
	"UpdateWorkflowExecutionOptions":   operate,
	"PauseWorkflowExecution":           operate,
	"UnpauseWorkflowExecution":         operate,
	"PauseActivity":                    operate,
	"UnpauseActivity":                  operate, // but not with its attempts reset: see operatorRefuses
	// A step's attempts and options are its runbook's: resetting its
	// attempts would run a maxAttempts: 1 step again, and its options
	// set its retries, timeouts and task queue, none of which the key
	// sealed. Admin only.
	"ResetActivity":         adminOnly,
	"UpdateActivityOptions": adminOnly,
	"CreateSchedule":        operate,
	"UpdateSchedule":        operate,
	"PatchSchedule":         operate,
	"DeleteSchedule":        operate,
	"StartBatchOperation":   operate, // but a batch deletion: see batchDeletes
	"StopBatchOperation":    operate,

	// A worker's polls and its answers to the tasks they gave it.
	"PollWorkflowTaskQueue":        poll,
	"PollActivityTaskQueue":        poll,
	"RespondWorkflowTaskCompleted": work,
	"RespondWorkflowTaskFailed":    work,
	"RespondQueryTaskCompleted":    work,
	"ResetStickyTaskQueue":         work,
	// An activity's result is sealed with its queue's codec key: one a
	// site's worker answers for another queue's activity does not open
	// in the workflow (internal/codec, queue.go).
	"RecordActivityTaskHeartbeat":  answer,
	"RespondActivityTaskCompleted": answer,
	"RespondActivityTaskFailed":    answer,
	"RespondActivityTaskCanceled":  answer,
	"ShutdownWorker":               answer,
	"RecordWorkerHeartbeat":        answer,
}

// keptForAdmin are the WorkflowService calls deliberately left to admin
// and system, with why; the test checks that together with
// workflowService they cover the whole API.
var keptForAdmin = map[string]string{
	"RegisterNamespace":  "namespaces: kedge setup",
	"UpdateNamespace":    "namespaces",
	"DeprecateNamespace": "namespaces",
	// Deleting a run deletes its history: the record of what was done.
	"DeleteWorkflowExecution": "history is the audit record",
	// By workflow and activity ID rather than a task token the SDK got
	// from a poll: Kedge's worker never uses them.
	"RecordActivityTaskHeartbeatById":  "not used by Kedge's worker",
	"RespondActivityTaskCompletedById": "not used by Kedge's worker",
	"RespondActivityTaskFailedById":    "not used by Kedge's worker",
	"RespondActivityTaskCanceledById":  "not used by Kedge's worker",
	// Nexus: Kedge registers no Nexus service.
	"PollNexusTaskQueue":                   "Nexus is not used",
	"RespondNexusTaskCompleted":            "Nexus is not used",
	"RespondNexusTaskFailed":               "Nexus is not used",
	"StartNexusOperationExecution":         "Nexus is not used",
	"DescribeNexusOperationExecution":      "Nexus is not used",
	"PollNexusOperationExecution":          "Nexus is not used",
	"ListNexusOperationExecutions":         "Nexus is not used",
	"CountNexusOperationExecutions":        "Nexus is not used",
	"RequestCancelNexusOperationExecution": "Nexus is not used",
	"TerminateNexusOperationExecution":     "Nexus is not used",
	"DeleteNexusOperationExecution":        "Nexus is not used",
	// Standalone activities would run Kedge's actions outside a runbook.
	"StartActivityExecution":            "standalone activities are not used",
	"DescribeActivityExecution":         "standalone activities are not used",
	"PollActivityExecution":             "standalone activities are not used",
	"ListActivityExecutions":            "standalone activities are not used",
	"CountActivityExecutions":           "standalone activities are not used",
	"RequestCancelActivityExecution":    "standalone activities are not used",
	"TerminateActivityExecution":        "standalone activities are not used",
	"DeleteActivityExecution":           "standalone activities are not used",
	"PauseActivityExecution":            "standalone activities are not used",
	"ResetActivityExecution":            "standalone activities are not used",
	"UnpauseActivityExecution":          "standalone activities are not used",
	"UpdateActivityExecutionOptions":    "standalone activities are not used",
	"PollWorkflowExecutionTimeSkipping": "time skipping is for test servers",
	// Task routing: which worker build gets a queue's tasks.
	"UpdateWorkerBuildIdCompatibility":             "task routing",
	"UpdateWorkerVersioningRules":                  "task routing",
	"SetCurrentDeployment":                         "task routing",
	"SetWorkerDeploymentCurrentVersion":            "task routing",
	"SetWorkerDeploymentRampingVersion":            "task routing",
	"SetWorkerDeploymentManager":                   "task routing",
	"CreateWorkerDeployment":                       "task routing",
	"CreateWorkerDeploymentVersion":                "task routing",
	"DeleteWorkerDeployment":                       "task routing",
	"DeleteWorkerDeploymentVersion":                "task routing",
	"UpdateWorkerDeploymentVersionMetadata":        "task routing",
	"UpdateWorkerDeploymentVersionComputeConfig":   "task routing",
	"ValidateWorkerDeploymentVersionComputeConfig": "task routing",
	"UpdateTaskQueueConfig":                        "task queue rate limits",
	"UpdateWorkerConfig":                           "workers' configuration",
	// Workflow rules act on every matching run of the namespace.
	"CreateWorkflowRule":  "namespace-wide rules",
	"DeleteWorkflowRule":  "namespace-wide rules",
	"TriggerWorkflowRule": "namespace-wide rules",
}

// operatorService classifies the OperatorService calls: only the search
// attributes' list (the Web UI's filters, `kedge setup --check`) is not
// an administrator's.
var operatorService = map[string]class{
	"ListSearchAttributes": read,
}

// classify places a call by its full gRPC name.
func classify(fullMethod string) class {
	name := api.MethodName(fullMethod)
	switch api.ServiceName(fullMethod) {
	case api.WorkflowServicePrefix:
		return workflowService[name] // adminOnly when missing
	case api.OperatorServicePrefix:
		return operatorService[name]
	}
	if fullMethod == healthpb.Health_Check_FullMethodName {
		return open
	}
	// The admin service, Nexus over HTTP, streams, anything else.
	return adminOnly
}

// may says whether a role may make calls of a class (before the task
// queue check of a poll).
func may(role mtls.Role, c class) bool {
	if role == mtls.RoleAdmin || role == mtls.RoleSystem {
		return true
	}
	return slices.Contains(allowed[role], c)
}
