/* datadir.c - the shipped data files, found beside the executable (datadir.h). */
#include "datadir.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* TILEOPS_DATA_REL: the data folder relative to the folder tileopsd is
 * installed in (sbindir); TILEOPS_DATA_DIR: the data folder as installed. */
#ifndef TILEOPS_DATA_REL
#define TILEOPS_DATA_REL "../share/tileops"
#endif
#ifndef TILEOPS_DATA_DIR
#define TILEOPS_DATA_DIR "/usr/local/share/tileops"
#endif

/* The folder of the running executable into buf; -1 when /proc is not mounted. */
static int exe_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	if (n <= 0 || (size_t)n >= len - 1)
		return -1;
	buf[n] = '\0';
	char *slash = strrchr(buf, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	return 0;
}

int datadir_find(const char *name, char *out, size_t len, char *looked, size_t looked_len)
{
	char dir[4096], cand[2][4096];
	int n = 0;

	if (exe_dir(dir, sizeof(dir)) == 0 &&
	    (size_t)snprintf(cand[n], sizeof(cand[n]), "%s/%s/%s", dir, TILEOPS_DATA_REL, name) <
	            sizeof(cand[n]))
		n++;
	snprintf(cand[n++], sizeof(cand[0]), "%s/%s", TILEOPS_DATA_DIR, name);
	if (looked && looked_len)
		looked[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (looked && looked_len) {
			size_t used = strlen(looked);
			snprintf(looked + used, looked_len - used, "%s%s", i ? ", " : "", cand[i]);
		}
		if (access(cand[i], R_OK) == 0) {
			/* Canonical, so that the log names /usr/share/..., not /usr/sbin/../share/... */
			char real[PATH_MAX];
			snprintf(out, len, "%s", realpath(cand[i], real) ? real : cand[i]);
			return 0;
		}
	}
	snprintf(out, len, "%s", cand[n - 1]);
	return -1;
}
