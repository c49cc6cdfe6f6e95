/*
 * address.c - where tileopsd listens by default.
 *
 * A daemon run by a user (systemd --user) puts its sockets under
 * $XDG_RUNTIME_DIR/tileopsd; a system daemon under /run/tileopsd. Clients
 * take the user's daemon when its socket is there, else the system one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "internal.h"

tileops_status tci_default_address(const char *file, char *buf, size_t len)
{
	const char *dir = getenv("XDG_RUNTIME_DIR");
	struct stat st;
	int n = -1;

	if (buf == NULL || len == 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "default address: no buffer to write it to");
	/* A user's own daemon when its socket exists; else the system daemon's,
	 * so a login shell (which has XDG_RUNTIME_DIR) reaches the system
	 * daemon without settings. */
	if (dir != NULL && dir[0] != '\0') {
		n = snprintf(buf, len, "ipc://%s/tileopsd/%s", dir, file);
		if (n >= 0 && (size_t)n < len && stat(buf + 6, &st) == 0 && S_ISSOCK(st.st_mode))
			return TILEOPS_OK;
	}
	n = snprintf(buf, len, "ipc:///run/tileopsd/%s", file);
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
