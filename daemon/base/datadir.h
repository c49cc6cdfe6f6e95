/*
 * datadir.h - where tileopsd finds the data files it ships (the manifest,
 * the GEMM tuning table): beside its own executable first, then in the
 * folder the build was configured to install them to.
 *
 * The executable's folder decides, read from /proc/self/exe, so that a
 * tree installed with `cmake --install --prefix DIR` (and moved anywhere
 * afterwards) and the build tree, which mirrors the installed layout
 * (<build>/share/tileops beside <build>/daemon), both find their own files
 * rather than those of another install.
 */
#ifndef TILEOPSD_DATADIR_H
#define TILEOPSD_DATADIR_H

#include <stddef.h>

/*
 * The first existing path of NAME (a file or folder under the data
 * folder, e.g. "gemm-tune-h200.txt" or "manifest") into out:
 * <exe dir>/TILEOPS_DATA_REL/NAME, then TILEOPS_DATA_DIR/NAME. Returns 0
 * when one exists (out is then canonical); -1 when none does (out then holds the installed path,
 * the one to report). looked, when not NULL, gets the paths tried,
 * separated by ", " (for the log).
 */
int datadir_find(const char *name, char *out, size_t len, char *looked, size_t looked_len);

#endif
