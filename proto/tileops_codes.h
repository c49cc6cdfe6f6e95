/*
 * tileops_codes.h - the one list of status codes and element types.
 *
 * Every side takes its numbers from here: the daemon's tileops_status and
 * the kernels' tk_status and tk_dtype are built from these lists, and the
 * public header (client/include/tileops.h, which must stand alone once
 * installed) spells the same enums out, checked against these lists when
 * libtileops is compiled (client/errors.c) as the wire enums of
 * tileops.proto are when tileopsd is (daemon/front/transport.c). Changing
 * a value here without the others fails the build.
 *
 * TILEOPS_STATUS_LIST(X): X(NAME, WIRE, value, "description"): the C name
 * is TILEOPS_<NAME>, the wire name (tileops.proto) STATUS_<WIRE>.
 * TILEOPS_DTYPE_LIST(X): X(NAME, value, "name", bytes per element).
 */
#ifndef TILEOPS_CODES_H
#define TILEOPS_CODES_H

#define TILEOPS_STATUS_LIST(X)                                               \
	X(OK, OK, 0, "success")                                              \
	X(ERR_INVALID_ARGUMENT, INVALID_ARGUMENT, 1, "invalid argument")     \
	X(ERR_CONNECT, CONNECT, 2, "cannot connect to tileopsd")             \
	X(ERR_PROTOCOL, PROTOCOL, 3, "protocol error")                       \
	X(ERR_VERSION, VERSION, 4, "protocol version mismatch")              \
	X(ERR_PERMISSION, PERMISSION, 5, "permission denied")                \
	X(ERR_NO_SESSION, NO_SESSION, 6, "no session on this connection")    \
	X(ERR_UNKNOWN_OP, UNKNOWN_OP, 7, "unknown op")                       \
	X(ERR_UNKNOWN_HANDLE, UNKNOWN_HANDLE, 8, "unknown tensor handle")    \
	X(ERR_DTYPE, DTYPE, 9, "dtype mismatch")                             \
	X(ERR_SHAPE, SHAPE, 10, "shape mismatch")                            \
	X(ERR_PARAM, PARAM, 11, "bad op parameter")                          \
	X(ERR_RANGE, RANGE, 12, "offset or length out of range")             \
	X(ERR_TOO_LARGE, TOO_LARGE, 13, "message too large")                 \
	X(ERR_OUT_OF_MEMORY, OUT_OF_MEMORY, 14, "out of memory")             \
	X(ERR_QUOTA, QUOTA, 15, "memory quota exceeded")                     \
	X(ERR_BUSY, BUSY, 16, "too many requests in flight")                 \
	X(ERR_UNSUPPORTED, UNSUPPORTED, 17, "not supported by this backend") \
	X(ERR_BACKEND, BACKEND, 18, "device error")                          \
	X(ERR_SHUTDOWN, SHUTDOWN, 19, "tileopsd is shutting down")           \
	X(ERR_TIMEOUT, TIMEOUT, 20, "timed out")                             \
	X(ERR_CLOSED, CLOSED, 21, "connection closed")                       \
	X(ERR_INTERNAL, INTERNAL, 22, "internal error")                      \
	X(IN_PROGRESS, IN_PROGRESS, 23, "in progress")

/* The numbers alone, for code that names a status without the enum. */
enum tileops_code {
#define TILEOPS_CODE_ENUM(name, wire, value, text) TILEOPS_CODE_##name = value,
	TILEOPS_STATUS_LIST(TILEOPS_CODE_ENUM)
#undef TILEOPS_CODE_ENUM
	        TILEOPS_CODE_COUNT
};

#define TILEOPS_DTYPE_LIST(X) \
	X(F32, 1, "f32", 4)   \
	X(F16, 2, "f16", 2)   \
	X(BF16, 3, "bf16", 2) \
	X(I32, 4, "i32", 4)   \
	X(I64, 5, "i64", 8)   \
	X(U8, 6, "u8", 1)     \
	X(FP8_E4M3, 7, "fp8_e4m3", 1)

/* One past the largest dtype value. */
#define TILEOPS_DTYPE_END 8

/* Capability bits of a HelloReply (tileops.h has them as TILEOPS_CAP_*). */
#define TILEOPS_CODE_CAP_CUDA_IPC (1u << 0) /* tensor import/export work */
#define TILEOPS_CODE_CAP_GPU (1u << 1)      /* tensors live on a GPU */
#define TILEOPS_CODE_CAP_MPS (1u << 2)      /* the daemon's GPU contexts are shared through MPS */

/*
 * tileops_status for the daemon, which does not include the client's
 * header. The guard is the one tileops.h defines its own copy under, so a
 * file that includes both gets one definition.
 */
#ifndef TILEOPS_STATUS_DEFINED
#define TILEOPS_STATUS_DEFINED
typedef enum tileops_status {
#define TILEOPS_STATUS_ENUM(name, wire, value, text) TILEOPS_##name = value,
	TILEOPS_STATUS_LIST(TILEOPS_STATUS_ENUM)
#undef TILEOPS_STATUS_ENUM
} tileops_status;
#endif

#endif /* TILEOPS_CODES_H */
