package temporalauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchpb "go.temporal.io/api/batch/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/namespace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"kedge.dev/kedge/internal/mtls"
)

// certs makes a team's certificates as `kedge setup tls` does, plus a
// worker of another queue, and returns each leaf by file name.
func certs(t *testing.T) map[string]*x509.Certificate {
	t.Helper()
	dir := t.TempDir()
	if _, err := mtls.Generate(mtls.Options{Dir: dir, ServerName: "temporal", Clients: mtls.DefaultClients, TaskQueues: []string{"kedge"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mtls.Generate(mtls.Options{Dir: dir, ServerName: "temporal", Clients: []string{"lyon-1:worker"}, TaskQueues: []string{"lyon"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mtls.Generate(mtls.Options{Dir: dir, ServerName: "temporal", Clients: []string{"lyon-site:site"}, SiteQueues: []string{"lyon"}}); err != nil {
		t.Fatal(err)
	}
	out := map[string]*x509.Certificate{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.pem"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(data)
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".pem")] = c
	}
	// A certificate of the team's CA made before roles: a CN, no OU.
	old := *out["operator"]
	old.Subject.OrganizationalUnit = nil
	old.Subject.CommonName = "old-operator"
	out["no-role"] = &old
	return out
}

func tlsInfo(c *x509.Certificate) *credentials.TLSInfo {
	if c == nil {
		return nil
	}
	return &credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c}}}}
}

func claimsOf(t *testing.T, c *x509.Certificate) *authorization.Claims {
	t.Helper()
	cl, err := ClaimMapper{}.GetClaims(&authorization.AuthInfo{TLSConnection: tlsInfo(c)})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

const ns = "default"

func pollReq(queue string, sticky bool) *workflowservice.PollWorkflowTaskQueueRequest {
	tq := &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}
	if sticky {
		tq = &taskqueuepb.TaskQueue{Name: "host:1234-sticky", Kind: enumspb.TASK_QUEUE_KIND_STICKY, NormalName: queue}
	}
	return &workflowservice.PollWorkflowTaskQueueRequest{Namespace: ns, TaskQueue: tq}
}

// The table, call by call and role by role: who may do what. Columns:
// viewer, operator, worker (of queue kedge), admin, system (the server's
// own certificate), a certificate without a role, no certificate.
func TestAuthorizerTable(t *testing.T) {
	cs := certs(t)
	who := []string{"viewer", "operator", "kedge-worker", "kedge-setup", "server", "no-role", ""}
	wf := api.WorkflowServicePrefix
	batch := func(op any) *workflowservice.StartBatchOperationRequest {
		r := &workflowservice.StartBatchOperationRequest{Namespace: ns}
		switch o := op.(type) {
		case *batchpb.BatchOperationTermination:
			r.Operation = &workflowservice.StartBatchOperationRequest_TerminationOperation{TerminationOperation: o}
		case *batchpb.BatchOperationDeletion:
			r.Operation = &workflowservice.StartBatchOperationRequest_DeletionOperation{DeletionOperation: o}
		case *batchpb.BatchOperationResetActivities:
			r.Operation = &workflowservice.StartBatchOperationRequest_ResetActivitiesOperation{ResetActivitiesOperation: o}
		case *batchpb.BatchOperationUpdateActivityOptions:
			r.Operation = &workflowservice.StartBatchOperationRequest_UpdateActivityOptionsOperation{UpdateActivityOptionsOperation: o}
		case *batchpb.BatchOperationUnpauseActivities:
			r.Operation = &workflowservice.StartBatchOperationRequest_UnpauseActivitiesOperation{UnpauseActivitiesOperation: o}
		}
		return r
	}
	for _, tc := range []struct {
		api  string
		req  any
		want string // one letter per column of who: y allowed, n refused
	}{
		// Health: everyone, so a client learns what it lacks from the call it makes.
		{healthpb.Health_Check_FullMethodName, nil, "yyyyyyy"},
		{wf + "GetSystemInfo", nil, "yyyyyyy"},
		// Reads: every role.
		{wf + "DescribeNamespace", nil, "yyyyynn"},
		{wf + "ListNamespaces", nil, "yyyyynn"},
		{wf + "ListWorkflowExecutions", nil, "yyyyynn"},
		{wf + "CountWorkflowExecutions", nil, "yyyyynn"},
		{wf + "DescribeWorkflowExecution", nil, "yyyyynn"},
		{wf + "GetWorkflowExecutionHistory", nil, "yyyyynn"},
		{wf + "GetWorkflowExecutionHistoryReverse", nil, "yyyyynn"},
		{wf + "QueryWorkflow", nil, "yyyyynn"},
		{wf + "DescribeTaskQueue", nil, "yyyyynn"},
		{wf + "ListSchedules", nil, "yyyyynn"},
		{wf + "DescribeSchedule", nil, "yyyyynn"},
		{wf + "PollWorkflowExecutionUpdate", nil, "yyyyynn"},
		{api.OperatorServicePrefix + "ListSearchAttributes", &operatorservice.ListSearchAttributesRequest{Namespace: ns}, "yyyyynn"},
		// Changes to runs: operators.
		{wf + "StartWorkflowExecution", nil, "nynyynn"},
		{wf + "SignalWorkflowExecution", nil, "nynyynn"},
		{wf + "SignalWithStartWorkflowExecution", nil, "nynyynn"},
		{wf + "UpdateWorkflowExecution", nil, "nynyynn"},
		{wf + "ExecuteMultiOperation", nil, "nynyynn"},
		{wf + "RequestCancelWorkflowExecution", nil, "nynyynn"},
		{wf + "TerminateWorkflowExecution", nil, "nynyynn"},
		{wf + "ResetWorkflowExecution", nil, "nynyynn"},
		{wf + "CreateSchedule", nil, "nynyynn"},
		{wf + "DeleteSchedule", nil, "nynyynn"},
		// A step's attempts and options: admin only (an operator without
		// the key would run a maxAttempts: 1 step again, raise its
		// retries or move it to another queue); pausing, and unpausing
		// without a reset, stay the operators'.
		{wf + "ResetActivity", nil, "nnnyynn"},
		{wf + "UpdateActivityOptions", nil, "nnnyynn"},
		{wf + "PauseActivity", nil, "nynyynn"},
		{wf + "UnpauseActivity", &workflowservice.UnpauseActivityRequest{Namespace: ns}, "nynyynn"},
		{wf + "UnpauseActivity", &workflowservice.UnpauseActivityRequest{Namespace: ns, ResetAttempts: true}, "nnnyynn"},
		{wf + "StartBatchOperation", batch(&batchpb.BatchOperationResetActivities{}), "nnnyynn"},
		{wf + "StartBatchOperation", batch(&batchpb.BatchOperationUpdateActivityOptions{}), "nnnyynn"},
		{wf + "StartBatchOperation", batch(&batchpb.BatchOperationUnpauseActivities{ResetAttempts: true}), "nnnyynn"},
		{wf + "StartBatchOperation", batch(&batchpb.BatchOperationUnpauseActivities{}), "nynyynn"},
		{wf + "StartBatchOperation", batch(&batchpb.BatchOperationTermination{}), "nynyynn"},
		// Deleting history: admin only, one by one or in a batch.
		{wf + "DeleteWorkflowExecution", nil, "nnnyynn"},
		{wf + "StartBatchOperation", batch(&batchpb.BatchOperationDeletion{}), "nnnyynn"},
		// A worker's polls: its own queue (or a sticky queue standing for it).
		{wf + "PollWorkflowTaskQueue", pollReq("kedge", false), "nnyyynn"},
		{wf + "PollWorkflowTaskQueue", pollReq("kedge", true), "nnyyynn"},
		{wf + "PollWorkflowTaskQueue", pollReq("lyon", false), "nnnyynn"},
		{wf + "PollWorkflowTaskQueue", pollReq("lyon", true), "nnnyynn"},
		{wf + "PollActivityTaskQueue", &workflowservice.PollActivityTaskQueueRequest{Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: "kedge"}}, "nnyyynn"},
		{wf + "PollActivityTaskQueue", &workflowservice.PollActivityTaskQueueRequest{Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: "lyon"}}, "nnnyynn"},
		{wf + "PollActivityTaskQueue", &workflowservice.PollActivityTaskQueueRequest{Namespace: ns}, "nnnyynn"},
		// A worker's answers to its tasks.
		{wf + "RespondWorkflowTaskCompleted", nil, "nnyyynn"},
		{wf + "RespondWorkflowTaskFailed", nil, "nnyyynn"},
		{wf + "RespondQueryTaskCompleted", nil, "nnyyynn"},
		{wf + "RecordActivityTaskHeartbeat", nil, "nnyyynn"},
		{wf + "RespondActivityTaskCompleted", nil, "nnyyynn"},
		{wf + "RespondActivityTaskFailed", nil, "nnyyynn"},
		{wf + "RespondActivityTaskCanceled", nil, "nnyyynn"},
		{wf + "ShutdownWorker", nil, "nnyyynn"},
		{wf + "RecordWorkerHeartbeat", nil, "nnyyynn"},
		// ... but not by workflow ID, which needs no task.
		{wf + "RespondActivityTaskCompletedById", nil, "nnnyynn"},
		{wf + "RecordActivityTaskHeartbeatById", nil, "nnnyynn"},
		// Administration.
		{wf + "RegisterNamespace", nil, "nnnyynn"},
		{wf + "UpdateNamespace", nil, "nnnyynn"},
		{wf + "UpdateWorkerVersioningRules", nil, "nnnyynn"},
		{wf + "StartActivityExecution", nil, "nnnyynn"},
		{wf + "PollNexusTaskQueue", nil, "nnnyynn"},
		{api.OperatorServicePrefix + "AddSearchAttributes", &operatorservice.AddSearchAttributesRequest{Namespace: ns}, "nnnyynn"},
		{api.OperatorServicePrefix + "DeleteNamespace", nil, "nnnyynn"},
		{api.OperatorServicePrefix + "ListNexusEndpoints", nil, "nnnyynn"},
		{api.AdminServicePrefix + "DescribeCluster", nil, "nnnyynn"},
		{api.AdminServicePrefix + "StreamWorkflowReplicationMessages", nil, "nnnyynn"},
		// A call this table has never heard of.
		{wf + "SomethingNewInTheNextRelease", nil, "nnnyynn"},
		{"/some.other.Service/Call", nil, "nnnyynn"},
	} {
		az := &Authorizer{Logger: discard}
		for i, w := range who {
			var claims *authorization.Claims
			if w != "" {
				claims = claimsOf(t, cs[w])
			}
			res, err := az.Authorize(context.Background(), claims, &authorization.CallTarget{APIName: tc.api, Namespace: ns, Request: tc.req})
			if err != nil {
				t.Fatalf("%s by %q: %v", tc.api, w, err)
			}
			got := res.Decision == authorization.DecisionAllow
			if want := tc.want[i] == 'y'; got != want {
				t.Errorf("%s (%T) by %q: allowed %v, want %v (reason %q)", api.MethodName(tc.api), tc.req, w, got, want, res.Reason)
			}
			if !got && res.Reason == "" {
				t.Errorf("%s by %q: refused without a reason", tc.api, w)
			}
		}
	}
}

// A site's worker, taken over, tries to decide what runs: it polls its
// own queue's workflow tasks, or a sticky queue standing for it or for
// the workflow queue (sticky names are in histories), answers a workflow
// or query task, starts a run. Everything but its own queue's activity
// tasks, their answers and reads is refused, with the reason.
func TestASitesWorkerAnswersActivityTasksOnly(t *testing.T) {
	cs := certs(t)
	az := &Authorizer{Logger: discard}
	site := claimsOf(t, cs["lyon-site"])
	wf := api.WorkflowServicePrefix
	activityPoll := func(q string) *workflowservice.PollActivityTaskQueueRequest {
		return &workflowservice.PollActivityTaskQueueRequest{Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: q}}
	}
	for _, c := range []struct {
		api    string
		req    any
		allow  bool
		reason string
	}{
		{wf + "PollActivityTaskQueue", activityPoll("lyon"), true, ""},
		{wf + "RespondActivityTaskCompleted", nil, true, ""},
		{wf + "RecordActivityTaskHeartbeat", nil, true, ""},
		{wf + "RespondActivityTaskFailed", nil, true, ""},
		{wf + "GetWorkflowExecutionHistory", nil, true, ""},
		{wf + "PollActivityTaskQueue", activityPoll("kedge"), false, `may poll task queues ["lyon"] only, not "kedge"`},
		{wf + "PollWorkflowTaskQueue", pollReq("lyon", false), false, "may poll activity tasks only, never a workflow's"},
		{wf + "PollWorkflowTaskQueue", pollReq("lyon", true), false, "may poll activity tasks only"},
		{wf + "PollWorkflowTaskQueue", pollReq("kedge", true), false, "may poll activity tasks only"},
		{wf + "RespondWorkflowTaskCompleted", nil, false, "site certificate CN=lyon-site may not call RespondWorkflowTaskCompleted"},
		{wf + "RespondWorkflowTaskFailed", nil, false, "may not call"},
		{wf + "RespondQueryTaskCompleted", nil, false, "may not call"},
		{wf + "StartWorkflowExecution", nil, false, "may not call"},
		{wf + "SignalWorkflowExecution", nil, false, "may not call"},
	} {
		res, err := az.Authorize(context.Background(), site, &authorization.CallTarget{APIName: c.api, Namespace: ns, Request: c.req})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Decision == authorization.DecisionAllow; got != c.allow || !strings.Contains(res.Reason, c.reason) {
			t.Errorf("%s (%T) by a site certificate: allowed %v (%q), want %v (%q)", api.MethodName(c.api), c.req, got, res.Reason, c.allow, c.reason)
		}
	}
}

// The worker of another site polls its queue only, and the reason says so.
func TestAWorkerPollsItsOwnQueuesOnly(t *testing.T) {
	cs := certs(t)
	az := &Authorizer{Logger: discard}
	lyon := claimsOf(t, cs["lyon-1"])
	for q, want := range map[string]bool{"lyon": true, "kedge": false, "Lyon": false, "lyon ": false} {
		res, _ := az.Authorize(context.Background(), lyon, &authorization.CallTarget{APIName: api.WorkflowServicePrefix + "PollActivityTaskQueue",
			Namespace: ns, Request: &workflowservice.PollActivityTaskQueueRequest{Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: q}}})
		if got := res.Decision == authorization.DecisionAllow; got != want {
			t.Errorf("lyon-1 polls %q: allowed %v, want %v (%s)", q, got, want, res.Reason)
		}
		if !want && !strings.Contains(res.Reason, `["lyon"]`) {
			t.Errorf("reason %q does not name the queues the certificate may poll", res.Reason)
		}
	}
	res, _ := az.Authorize(context.Background(), claimsOf(t, cs["no-role"]), &authorization.CallTarget{APIName: api.WorkflowServicePrefix + "ListWorkflowExecutions", Namespace: ns})
	if res.Decision == authorization.DecisionAllow || !strings.Contains(res.Reason, "old-operator") || !strings.Contains(res.Reason, "no Kedge role") {
		t.Errorf("a certificate without a role: %+v", res)
	}
}

// Every call of the pinned Temporal API is placed: allowed to some roles
// (workflowService) or kept for admin (keptForAdmin), never both; and
// what the table lets viewers, operators and workers call agrees with
// Temporal's own metadata (no read is a write, nothing but admin's is
// an administrator's).
func TestEveryCallIsClassified(t *testing.T) {
	methods := workflowservice.File_temporal_api_workflowservice_v1_service_proto.Services().ByName("WorkflowService").Methods()
	inAPI := map[string]bool{}
	for i := 0; i < methods.Len(); i++ {
		name := string(methods.Get(i).Name())
		inAPI[name] = true
		c, placed := workflowService[name]
		_, kept := keptForAdmin[name]
		switch {
		case placed && kept:
			t.Errorf("%s is both in the table and kept for admin", name)
		case !placed && !kept:
			t.Errorf("%s is a call of this Temporal release no role is given nor kept from: classify it in table.go", name)
		case placed:
			md := api.GetMethodMetadata(api.WorkflowServicePrefix + name)
			if c == read && md.Access != api.AccessReadOnly {
				t.Errorf("%s is a read here, but Temporal's metadata says access %d", name, md.Access)
			}
			if md.Access == api.AccessAdmin {
				t.Errorf("%s is an administrator's call in Temporal's metadata, given to %v here", name, c)
			}
		}
	}
	for name := range workflowService {
		if !inAPI[name] {
			t.Errorf("table.go names %s, which the API does not have", name)
		}
	}
	for name := range keptForAdmin {
		if !inAPI[name] {
			t.Errorf("keptForAdmin names %s, which the API does not have", name)
		}
	}
	for name, c := range operatorService {
		if md := api.GetMethodMetadata(api.OperatorServicePrefix + name); c != read || md.Access != api.AccessReadOnly {
			t.Errorf("OperatorService %s: class %v, Temporal access %d", name, c, md.Access)
		}
	}
}

// Temporal's own interceptor, as the frontend runs it, with this
// package's mapper and authorizer: a connection with the viewer's
// certificate cannot start a workflow (PermissionDenied, with the reason;
// the handler never runs) but can list; the operator's can start.
func TestTheFrontendInterceptorRefusesAViewersStart(t *testing.T) {
	cs := certs(t)
	off := dynamicconfig.GetBoolPropertyFn(false)
	ic := authorization.NewInterceptor(ClaimMapper{}, &Authorizer{Logger: discard}, metrics.NoopMetricsHandler, log.NewNoopLogger(),
		nsChecker{}, nil, "", "", dynamicconfig.GetBoolPropertyFn(true), off,
		func(string) bool { return false }, off)
	call := func(who, method string, req any) (bool, error) {
		ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: *tlsInfo(cs[who])})
		ran := false
		_, err := ic.Intercept(ctx, req, &grpc.UnaryServerInfo{FullMethod: api.WorkflowServicePrefix + method},
			func(context.Context, any) (any, error) { ran = true; return nil, nil })
		return ran, err
	}
	start := &workflowservice.StartWorkflowExecutionRequest{Namespace: ns, WorkflowId: "x"}
	ran, err := call("viewer", "StartWorkflowExecution", start)
	var denied *serviceerror.PermissionDenied
	if ran || !errors.As(err, &denied) || denied.Reason != "viewer certificate CN=viewer may not call StartWorkflowExecution" {
		t.Errorf("viewer's start: ran %v, err %v (%+v)", ran, err, denied)
	}
	if ran, err := call("viewer", "ListWorkflowExecutions", &workflowservice.ListWorkflowExecutionsRequest{Namespace: ns}); !ran || err != nil {
		t.Errorf("viewer's list: ran %v, err %v", ran, err)
	}
	if ran, err := call("operator", "StartWorkflowExecution", start); !ran || err != nil {
		t.Errorf("operator's start: ran %v, err %v", ran, err)
	}
	if ran, err := call("kedge-worker", "TerminateWorkflowExecution", &workflowservice.TerminateWorkflowExecutionRequest{Namespace: ns}); ran || !errors.As(err, &denied) {
		t.Errorf("worker's terminate: ran %v, err %v", ran, err)
	}
}

type nsChecker struct{}

func (nsChecker) Exists(namespace.Name) error { return nil }

var discard = slog.New(slog.DiscardHandler)
