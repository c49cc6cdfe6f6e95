/*
 * address.h - default nng addresses of tileopsd's sockets, shared by the
 * library and the tools built on it.
 */
#ifndef TILEOPS_CLIENT_ADDRESS_H
#define TILEOPS_CLIENT_ADDRESS_H

#include <stddef.h>

#include "tileops.h"

/*
 * Write "ipc://<dir>/<file>" into buf (len bytes with the NUL), where dir is
 * $XDG_RUNTIME_DIR/tileopsd when that is set and not empty, else
 * /run/tileopsd. TILEOPS_ERR_INVALID_ARGUMENT when buf is too small.
 */
tileops_status tci_default_address(const char *file, char *buf, size_t len);

#endif /* TILEOPS_CLIENT_ADDRESS_H */
