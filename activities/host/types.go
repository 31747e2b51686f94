package host

import api "kedge.dev/kedge/actions/host"

// The host actions' names and their input and result types are declared
// in kedge.dev/kedge/actions/host, pure data the action table links
// without SSH; these aliases keep their names here.

// Action names, as runbooks spell them in `action:`.
const (
	PreflightAction        = api.PreflightAction
	LayoutAction           = api.LayoutAction
	PullImageAction        = api.PullImageAction
	PullCRIImagesAction    = api.PullCRIImagesAction
	RunAction              = api.RunAction
	WriteFileAction        = api.WriteFileAction
	WriteDropInAction      = api.WriteDropInAction
	RestoreFileAction      = api.RestoreFileAction
	ReadFileAction         = api.ReadFileAction
	SystemdAction          = api.SystemdAction
	InstallBundleAction    = api.InstallBundleAction
	RestoreBundleAction    = api.RestoreBundleAction
	CertInfoAction         = api.CertInfoAction
	RestartStaticPodAction = api.RestartStaticPodAction
	KubeletFilesAction     = api.KubeletFilesAction
	PrepareNodeAction      = api.PrepareNodeAction
	CheckReadableAction    = api.CheckReadableAction
	WaitPodTokensAction    = api.WaitPodTokensAction
)

// Inputs and results of the actions, and the types they hold.
type (
	PreflightInput         = api.PreflightInput
	WaitPodTokensInput     = api.WaitPodTokensInput
	WaitPodTokensResult    = api.WaitPodTokensResult
	PreflightResult        = api.PreflightResult
	LayoutInput            = api.LayoutInput
	LayoutResult           = api.LayoutResult
	PullImageInput         = api.PullImageInput
	PullImageResult        = api.PullImageResult
	PullCRIImagesInput     = api.PullCRIImagesInput
	PullCRIImagesResult    = api.PullCRIImagesResult
	RunInput               = api.RunInput
	RunResult              = api.RunResult
	WriteFileInput         = api.WriteFileInput
	WriteFileResult        = api.WriteFileResult
	WriteDropInInput       = api.WriteDropInInput
	RestoreFileInput       = api.RestoreFileInput
	RestoreFileResult      = api.RestoreFileResult
	ReadFileInput          = api.ReadFileInput
	ReadFileResult         = api.ReadFileResult
	SystemdInput           = api.SystemdInput
	SystemdResult          = api.SystemdResult
	BundleFile             = api.BundleFile
	InstallBundleInput     = api.InstallBundleInput
	InstallBundleResult    = api.InstallBundleResult
	RestoreBundleInput     = api.RestoreBundleInput
	RestoreBundleResult    = api.RestoreBundleResult
	CertInfoInput          = api.CertInfoInput
	CertFile               = api.CertFile
	CertInfoResult         = api.CertInfoResult
	RestartStaticPodInput  = api.RestartStaticPodInput
	RestartStaticPodResult = api.RestartStaticPodResult
	KubeletFilesInput      = api.KubeletFilesInput
	KubeletFilesResult     = api.KubeletFilesResult
	PrepareNodeInput       = api.PrepareNodeInput
	PrepareNodeResult      = api.PrepareNodeResult
	FileReader             = api.FileReader
	CheckReadableInput     = api.CheckReadableInput
	CheckReadableResult    = api.CheckReadableResult
)
