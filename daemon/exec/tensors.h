/*
 * tensors.h - a session's tensors on the device: made, imported, freed,
 * copied to and from its arena, exported, and looked up as kernel views.
 * Executor thread of the session only. Each function that answers a job
 * sets j->status and j->msg (and the job's results) and leaves the job to
 * the caller, except where it says it owes the answer.
 */
#ifndef TILEOPSD_TENSORS_H
#define TILEOPSD_TENSORS_H

#include "request.h"
#include "warmup.h"
#include "worker.h"

/* Make a tensor of `spec` on device index `device` (checked); j gets the
 * handle and byte count. */
void tensors_make(executor *ex, session *s, job *j, const tensor_spec *spec, uint32_t device);
/* Import one: the exporter's 64-byte handle, the tensor's offset in the
 * allocation it names and the bytes it may touch from there (0: its own
 * size), checked against the allocation's size. */
void tensors_import(executor *ex, session *s, job *j, const tensor_spec *spec,
                    const unsigned char ipc[64], uint64_t offset, uint64_t bytes);
/* A view of base's memory (tileops_tensor_view): strides NULL for packed.
 * Holds a reference on the memory; checked to lie inside base. */
void tensors_view(executor *ex, session *s, job *j, uint64_t base, uint64_t byte_offset,
                  const tensor_spec *spec, const int64_t *strides);
/* A warm-up plan's tensor, named in the error message. */
void tensors_make_warm(executor *ex, session *s, job *j, const warm_tensor *t);
/* Free a tensor; the caller first drops the plans' graphs that use it
 * (plan_forget_tensor). */
void tensors_free(executor *ex, session *s, job *j, uint64_t handle);
/* Free every tensor of s (session close). */
void tensors_free_all(executor *ex, session *s);
/* A copy between a tensor and the arena; returns 1 when the answer is
 * owed until the copy is done (completion_defer), 0 when it is j's now. */
int tensors_copy(worker *w, session *s, job *j, int write, uint64_t handle, uint64_t toff,
                 uint64_t aoff, uint64_t len);
/* Copy every byte of src into dst (tileops_tensor_copy): both packed, of
 * one byte size, on one device or two; queued after the work on either so
 * far, and later work on either waits for it. */
void tensors_copy_pair(executor *ex, session *s, job *j, uint64_t dst, uint64_t src);
/* j gets the handle of the allocation under the tensor, the tensor's offset
 * in it and its bytes. */
void tensors_export(executor *ex, session *s, job *j, uint64_t handle);
/* The CUDA IPC events (tileops_event_wait, tileops_event_record), in the
 * session's stream order; TILEOPS_ERR_UNSUPPORTED where the backend has
 * none. record writes the event's handle to out. */
tileops_status tensors_event_wait(executor *ex, session *s, const unsigned char ev[64], char *err,
                                  size_t errlen);
tileops_status tensors_event_record(executor *ex, session *s, unsigned char out[64], char *err,
                                    size_t errlen);

/*
 * How an op's handles become kernel views: the session's own tensors
 * (tensors_resolver), or what a plan being checked or captured maps them
 * to (plan.c). view() returns TILEOPS_OK or TILEOPS_ERR_UNKNOWN_HANDLE, and
 * the index of the device the tensor is on in *device.
 */
typedef struct tensor_resolver {
	tileops_status (*view)(const void *ctx, uint64_t handle, tk_tensor *v, int *device);
	const void *ctx;
} tensor_resolver;
tensor_resolver tensors_resolver(const session *s);

#endif
