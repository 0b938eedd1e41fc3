package resp

import "syscall"

// The errors Serve and a connection treat specially.
var (
	syscallEMFILE     = syscall.EMFILE
	syscallECONNRESET = syscall.ECONNRESET
)
