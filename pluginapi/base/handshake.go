package base

import "github.com/hashicorp/go-plugin"

// Handshake is the go-plugin handshake every plugin of this runtime answers.
// A binary that does not know the cookie refuses to start as a plugin, and the
// core refuses binaries that do not answer it.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  APIVersion,
	MagicCookieKey:   "STARPU_GO_PLUGIN",
	MagicCookieValue: "c0d3l3t5-t4sks-d4t4",
}

// ArenaFD is the file descriptor on which a plugin process finds the memfd of
// the core's shared-memory arena (passed as the first of exec.Cmd.ExtraFiles).
const ArenaFD = 3
