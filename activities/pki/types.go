package pki

import api "kedge.dev/kedge/actions/pki"

// Action names, declared in actions/pki.
const (
	AdoptAction           = api.AdoptAction
	RenewAction           = api.RenewAction
	CheckCALifeAction     = api.CheckCALifeAction
	RotateCAAction        = api.RotateCAAction
	ExportTerraformAction = api.ExportTerraformAction
)

// The actions' inputs and results, declared in actions/pki.
type (
	AdoptInput            = api.AdoptInput
	AdoptResult           = api.AdoptResult
	RenewInput            = api.RenewInput
	RenewResult           = api.RenewResult
	CheckCALifeInput      = api.CheckCALifeInput
	CheckCALifeResult     = api.CheckCALifeResult
	NamedCA               = api.NamedCA
	CALife                = api.CALife
	ExportTerraformInput  = api.ExportTerraformInput
	ExportTerraformResult = api.ExportTerraformResult
)
