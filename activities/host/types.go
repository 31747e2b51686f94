package host

// The host actions' names and their input and result types are declared
// in kedge.dev/kedge/actions/host, pure data the action table links
// without SSH; these aliases keep their names here.
