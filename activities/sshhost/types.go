package sshhost

// The host actions' names and their input and result types are declared
// in kedge.dev/kedge/actions/host, pure data the action table links
// without SSH.
