/*
 * errors.c - status strings and the per-thread message of the last failure.
 *
 * The message buffer is the library's only global state: one per thread,
 * so no lock guards it.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "tileops_codes.h"

#define TCI_ERROR_BYTES 1024

static _Thread_local char tls_error[TCI_ERROR_BYTES];

/* The descriptions, and a check that this header's values are the list's. */
static const char *const status_text[] = {
#define STATUS_TEXT(name, wire, value, text) [value] = text,
	TILEOPS_STATUS_LIST(STATUS_TEXT)
#undef STATUS_TEXT
};

#define STATUS_SAME(name, wire, value, text)      \
	_Static_assert(TILEOPS_##name == (value), \
	               "tileops.h: TILEOPS_" #name " differs from proto/tileops_codes.h");
TILEOPS_STATUS_LIST(STATUS_SAME)
#undef STATUS_SAME
#define DTYPE_SAME(name, value, text, size)       \
	_Static_assert(TILEOPS_##name == (value), \
	               "tileops.h: TILEOPS_" #name " differs from proto/tileops_codes.h");
TILEOPS_DTYPE_LIST(DTYPE_SAME)
#undef DTYPE_SAME
_Static_assert(TILEOPS_CAP_CUDA_IPC == TILEOPS_CODE_CAP_CUDA_IPC &&
                       TILEOPS_CAP_GPU == TILEOPS_CODE_CAP_GPU &&
                       TILEOPS_CAP_MPS == TILEOPS_CODE_CAP_MPS,
               "tileops.h: TILEOPS_CAP_* differ from proto/tileops_codes.h");

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
