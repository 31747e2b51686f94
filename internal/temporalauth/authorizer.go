package temporalauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/authorization"

	"kedge.dev/kedge/internal/mtls"
)

// AuthType names the claims this package makes (a run's principal, when
// Temporal records principals).
const AuthType = "mtls"

// identity is what the claim mapper found in a certificate: the identity,
// or why it has none.
type identity struct {
	mtls.Identity
	err error
}

// ClaimMapper reads the role of the client certificate the frontend
// verified (its chain to the team's CA is checked before any call).
type ClaimMapper struct{}

var _ authorization.ClaimMapper = ClaimMapper{}

// GetClaims maps a caller to its role. A caller without a certificate, or
// whose certificate has no role, gets claims with none: the authorizer
// refuses it everything but health checks, saying why.
func (ClaimMapper) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	cert := authorization.PeerCert(info.TLSConnection)
	if cert == nil {
		return &authorization.Claims{AuthType: AuthType, Extensions: identity{err: errNoCertificate}}, nil
	}
	id, err := mtls.IdentityOf(cert)
	claims := &authorization.Claims{Subject: id.Name, AuthType: AuthType, Extensions: identity{Identity: id, err: err}}
	if err == nil {
		// Temporal's own roles, for anything of the server that reads
		// them; the authorizer decides by the table.
		claims.System = map[mtls.Role]authorization.Role{
			mtls.RoleViewer:   authorization.RoleReader,
			mtls.RoleOperator: authorization.RoleWriter,
			mtls.RoleWorker:   authorization.RoleWorker | authorization.RoleReader,
			mtls.RoleAdmin:    authorization.RoleAdmin,
			mtls.RoleSystem:   authorization.RoleAdmin,
		}[id.Role]
	}
	return claims, nil
}

var errNoCertificate = errors.New("no verified client certificate")

// Authorizer allows each role the calls of its classes (table.go).
type Authorizer struct {
	// Logger gets an audit line for each refused call; nil: slog's
	// default.
	Logger *slog.Logger
}

var _ authorization.Authorizer = (*Authorizer)(nil)

// Authorize decides one call. A refusal carries its reason, which the
// caller sees in the PermissionDenied error.
func (a *Authorizer) Authorize(_ context.Context, claims *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
	c := classify(target.APIName)
	if c == open {
		return authorization.Result{Decision: authorization.DecisionAllow}, nil
	}
	var id identity
	if claims != nil {
		id, _ = claims.Extensions.(identity)
	}
	if claims == nil || (id.err == nil && id.Role == "") {
		id.err = errNoCertificate
	}
	reason := ""
	switch {
	case id.err != nil:
		reason = id.err.Error()
	case id.Role == mtls.RoleAdmin || id.Role == mtls.RoleSystem:
	case !may(id.Role, c):
		reason = fmt.Sprintf("%s certificate CN=%s may not call %s", id.Role, id.Name, api.MethodName(target.APIName))
	case c == poll && id.Role == mtls.RoleSite && !isActivityPoll(target.Request):
		reason = fmt.Sprintf("site certificate CN=%s may poll activity tasks only, never a workflow's", id.Name)
	case c == poll:
		if q, ok := pollQueue(target.Request); !ok || !slices.Contains(id.TaskQueues, q) {
			reason = fmt.Sprintf("%s certificate CN=%s may poll task queues %q only, not %q", id.Role, id.Name, id.TaskQueues, q)
		}
	case c == operate && operatorRefuses(target.Request) != "":
		reason = fmt.Sprintf("%s certificate CN=%s may not %s", id.Role, id.Name, operatorRefuses(target.Request))
	}
	if reason != "" {
		a.log().Warn("temporal: call refused", "audit", true, "api", api.MethodName(target.APIName),
			"namespace", target.Namespace, "subject", id.Name, "role", string(id.Role), "reason", reason)
		return authorization.Result{Decision: authorization.DecisionDeny, Reason: reason}, nil
	}
	return authorization.Result{Decision: authorization.DecisionAllow,
		Principal: &commonpb.Principal{Type: AuthType, Name: id.Name}}, nil
}

func (a *Authorizer) log() *slog.Logger {
	if a.Logger == nil {
		return slog.Default()
	}
	return a.Logger
}

// pollQueue is the task queue a poll is for: its name, or for a sticky
// queue (one worker process's cache) the queue it stands for.
func pollQueue(req any) (string, bool) {
	var tq *taskqueuepb.TaskQueue
	switch r := req.(type) {
	case *workflowservice.PollWorkflowTaskQueueRequest:
		tq = r.GetTaskQueue()
	case *workflowservice.PollActivityTaskQueueRequest:
		tq = r.GetTaskQueue()
	default:
		return "", false
	}
	if tq.GetKind() == enumspb.TASK_QUEUE_KIND_STICKY {
		return tq.GetNormalName(), tq.GetNormalName() != ""
	}
	return tq.GetName(), tq.GetName() != ""
}

func isActivityPoll(req any) bool {
	_, ok := req.(*workflowservice.PollActivityTaskQueueRequest)
	return ok
}

// operatorRefuses says what an operator's call would do that only an
// admin may ("" when nothing): delete runs in a batch (as
// DeleteWorkflowExecution), or reset a step's attempts or change its
// options, one by one or in a batch (as ResetActivity and
// UpdateActivityOptions).
func operatorRefuses(req any) string {
	switch r := req.(type) {
	case *workflowservice.StartBatchOperationRequest:
		switch {
		case r.GetDeletionOperation() != nil || r.GetDeleteActivitiesOperation() != nil:
			return "delete runs"
		case r.GetResetActivitiesOperation() != nil:
			return "reset activities' attempts"
		case r.GetUpdateActivityOptionsOperation() != nil:
			return "change activities' options"
		case r.GetUnpauseActivitiesOperation().GetResetAttempts():
			return "reset activities' attempts"
		}
	case *workflowservice.UnpauseActivityRequest:
		if r.GetResetAttempts() {
			return "reset activities' attempts"
		}
	}
	return ""
}
