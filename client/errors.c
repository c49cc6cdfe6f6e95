/*
 * errors.c - status strings and the per-thread message of the last failure.
 *
 * The message buffer is the library's only global state: one per thread,
 * so no lock guards it.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define TCI_ERROR_BYTES 1024

static _Thread_local char tls_error[TCI_ERROR_BYTES];

static const char *const status_text[] = {
	[TILEOPS_OK] = "success",
	[TILEOPS_ERR_INVALID_ARGUMENT] = "invalid argument",
	[TILEOPS_ERR_CONNECT] = "cannot connect to tileopsd",
	[TILEOPS_ERR_PROTOCOL] = "protocol error",
	[TILEOPS_ERR_VERSION] = "protocol version mismatch",
	[TILEOPS_ERR_PERMISSION] = "permission denied",
	[TILEOPS_ERR_NO_SESSION] = "no session on this connection",
	[TILEOPS_ERR_UNKNOWN_OP] = "unknown op",
	[TILEOPS_ERR_UNKNOWN_HANDLE] = "unknown tensor handle",
	[TILEOPS_ERR_DTYPE] = "dtype mismatch",
	[TILEOPS_ERR_SHAPE] = "shape mismatch",
	[TILEOPS_ERR_PARAM] = "bad op parameter",
	[TILEOPS_ERR_RANGE] = "offset or length out of range",
	[TILEOPS_ERR_TOO_LARGE] = "message too large",
	[TILEOPS_ERR_OUT_OF_MEMORY] = "out of memory",
	[TILEOPS_ERR_QUOTA] = "memory quota exceeded",
	[TILEOPS_ERR_BUSY] = "too many requests in flight",
	[TILEOPS_ERR_UNSUPPORTED] = "not supported by this backend",
	[TILEOPS_ERR_BACKEND] = "device error",
	[TILEOPS_ERR_SHUTDOWN] = "tileopsd is shutting down",
	[TILEOPS_ERR_TIMEOUT] = "timed out",
	[TILEOPS_ERR_CLOSED] = "connection closed",
	[TILEOPS_ERR_INTERNAL] = "internal error",
	[TILEOPS_IN_PROGRESS] = "in progress",
};

#define STATUS_COUNT (sizeof(status_text) / sizeof(status_text[0]))

TILEOPS_API const char *tileops_strerror(int status)
{
	if (status < 0 || (size_t)status >= STATUS_COUNT || status_text[status] == NULL)
		return "unknown status";
	return status_text[status];
}

TILEOPS_API const char *tileops_last_error(void)
{
	return tls_error;
}

/* Whether `status` is a code the daemon may put in a Reply. */
int tci_status_valid(int status)
{
	return status >= TILEOPS_OK && status < TILEOPS_IN_PROGRESS;
}

void tci_error_set_text(const char *msg)
{
	snprintf(tls_error, sizeof(tls_error), "%s", msg ? msg : "");
}

/* Record a failure for this thread and return its status, so callers can
 * write `return tci_error(...)`. */
tileops_status tci_error(tileops_status st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tls_error, sizeof(tls_error), fmt, ap);
	va_end(ap);
	return st;
}

tileops_status tci_status_from_nng(int nng_err)
{
	switch (nng_err) {
	case 0:
		return TILEOPS_OK;
	case NNG_ECONNREFUSED:
	case NNG_ENOENT:
	case NNG_EADDRINVAL:
	case NNG_EUNREACHABLE:
		return TILEOPS_ERR_CONNECT;
	case NNG_ECLOSED:
	case NNG_ECONNRESET:
	case NNG_ECONNSHUT:
	case NNG_ECANCELED:
		return TILEOPS_ERR_CLOSED;
	case NNG_ETIMEDOUT:
		return TILEOPS_ERR_TIMEOUT;
	case NNG_ENOMEM:
		return TILEOPS_ERR_OUT_OF_MEMORY;
	case NNG_EMSGSIZE:
		return TILEOPS_ERR_TOO_LARGE;
	case NNG_EPROTO:
	case NNG_ESTATE:
		return TILEOPS_ERR_PROTOCOL;
	default:
		return TILEOPS_ERR_INTERNAL;
	}
}

/* Record an nng failure of `what` with nng's own words. */
tileops_status tci_error_nng(tileops_status st, int nng_err, const char *what)
{
	return tci_error(st, "%s: %s", what, nng_strerror(nng_err));
}
