// Package host declares the host actions: their names, as runbooks spell
// them in `action:`, their input and result types, with the struct tags
// the runbook language and the action table read by reflection, and each
// one's row of the table (spec.Register, in the file that declares it).
//
// It is pure data, so the action table, the language and the workflow can
// name host actions without linking SSH or SFTP: it must never import
// anything but the standard library, kedge.dev/kedge/actions/target,
// kedge.dev/kedge/actions/spec and kedge.dev/kedge/actions/layout. The actions are implemented by
// kedge.dev/kedge/activities/sshhost.
package host
