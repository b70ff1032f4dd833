// Package cli implements the pdc command line: one file per subcommand,
// each parsing its flags and calling the client, server or bench packages.
// Nothing here exits the process; Run returns an error and main prints it.
package cli
