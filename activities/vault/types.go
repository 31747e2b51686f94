package vault

import (
	"kedge.dev/kedge/actions/target"
	api "kedge.dev/kedge/actions/vault"
)

// Action names, declared in actions/vault.
const (
	IssueCertAction  = api.IssueCertAction
	ReadSecretAction = api.ReadSecretAction
	ClusterCAAction  = api.ClusterCAAction
	KeyPairAction    = api.KeyPairAction
	StageCAAction    = api.StageCAAction
)

// Config is the inventory's vault section, injected by the workflow.
type Config = target.Vault

// The actions' inputs and results, declared in actions/vault.
type (
	IssueCertInput   = api.IssueCertInput
	IssueCertResult  = api.IssueCertResult
	ClusterCAInput   = api.ClusterCAInput
	ClusterCAResult  = api.ClusterCAResult
	KeyPairInput     = api.KeyPairInput
	KeyPairResult    = api.KeyPairResult
	ReadSecretInput  = api.ReadSecretInput
	ReadSecretResult = api.ReadSecretResult
	StageCAInput     = api.StageCAInput
	StageCAResult    = api.StageCAResult
)
