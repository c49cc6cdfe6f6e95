/*
 * address.c - where tileopsd listens by default.
 *
 * A daemon run by a user (systemd --user) puts its sockets under
 * $XDG_RUNTIME_DIR/tileopsd; a system daemon under /run/tileopsd.
 */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

tileops_status tci_default_address(const char *file, char *buf, size_t len)
{
	const char *dir = getenv("XDG_RUNTIME_DIR");
	int n;

	if (buf == NULL || len == 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "default address: no buffer to write it to");
	if (dir == NULL || dir[0] == '\0')
		dir = "/run";
	n = snprintf(buf, len, "ipc://%s/tileopsd/%s", dir, file);
	if (n < 0 || (size_t)n >= len) {
		buf[0] = '\0';
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "default address: buffer of %zu bytes is too small, need %d", len,
		                 n + 1);
	}
	return TILEOPS_OK;
}

TILEOPS_API tileops_status tileops_default_address(char *buf, size_t len)
{
	return tci_default_address("tileopsd.sock", buf, len);
}
