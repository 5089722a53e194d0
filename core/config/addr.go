package config

import (
	"fmt"
	"net"
	"strconv"
)

// checkAddr checks a listening address such as the dashboard's: host:port
// with a numeric port from 0 to 65535 (0 picks a free port). An empty host
// listens on every interface. Whether the host resolves and the port is
// free is for the listener to say.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port; want an address such as 127.0.0.1:8090: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}
