/* admission.c - who may open a session (see admission.h). */
#include "admission.h"

#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The process's groups from /proc/PID/status, if its uid is still `uid`. */
static int groups_from_proc(peer *p)
{
	char path[64], line[4096];
	snprintf(path, sizeof(path), "/proc/%lld/status", (long long)p->pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int uid_ok = 0, n = -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Uid:", 4) == 0) {
			long long real, eff;
			uid_ok = sscanf(line + 4, "%lld %lld", &real, &eff) == 2 &&
			         (real == p->uid || eff == p->uid);
		} else if (strncmp(line, "Groups:", 7) == 0) {
			n = 0;
			char *s = line + 7, *end;
			for (;;) {
				long long g = strtoll(s, &end, 10);
				if (end == s || n == ADMISSION_MAX_GROUPS)
					break;
				p->groups[n++] = g;
				s = end;
			}
		}
	}
	fclose(f);
	if (!uid_ok || n < 0)
		return -1;
	p->n_groups = n;
	return 0;
}

/* The user's groups from the user database (NSS). */
static void groups_from_db(peer *p)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	if (getpwuid_r((uid_t)p->uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return;
	gid_t gs[ADMISSION_MAX_GROUPS];
	int n = ADMISSION_MAX_GROUPS;
	if (getgrouplist(pw.pw_name, pw.pw_gid, gs, &n) < 0)
		n = ADMISSION_MAX_GROUPS; /* the first ones fit */
	for (int i = 0; i < n && i < ADMISSION_MAX_GROUPS; i++)
		p->groups[i] = gs[i];
	p->n_groups = n < ADMISSION_MAX_GROUPS ? n : ADMISSION_MAX_GROUPS;
}

void admission_peer(peer *p, int64_t uid, int64_t gid, int64_t pid)
{
	memset(p, 0, sizeof(*p));
	p->uid = uid;
	p->gid = gid;
	p->pid = pid;
	if (uid < 0)
		return;
	if (pid <= 0 || groups_from_proc(p) != 0)
		groups_from_db(p);
}

int admission_in_group(const peer *p, int64_t gid)
{
	if (gid < 0)
		return 0;
	if (p->gid == gid)
		return 1;
	for (int i = 0; i < p->n_groups; i++)
		if (p->groups[i] == gid)
			return 1;
	return 0;
}

int admission_allowed(const peer *p, uid_t daemon_uid, gid_t allow_gid, char *why, size_t len)
{
	if (p->uid < 0) {
		snprintf(why, len,
		         "the peer's credentials are unknown (sessions need a local "
		         "ipc:// connection)");
		return 0;
	}
	if (p->uid == (int64_t)daemon_uid || p->uid == 0)
		return 1;
	if (allow_gid != (gid_t)-1 && admission_in_group(p, (int64_t)allow_gid))
		return 1;
	char group[64] = "";
	struct group gr, *res = NULL;
	char buf[4096];
	if (allow_gid != (gid_t)-1 && getgrgid_r(allow_gid, &gr, buf, sizeof(buf), &res) == 0 &&
	    res)
		snprintf(group, sizeof(group), " '%.40s'", gr.gr_name);
	if (allow_gid == (gid_t)-1)
		snprintf(why, len,
		         "uid %lld is not tileopsd's uid (%u) or root, and no allow_group is "
		         "configured",
		         (long long)p->uid, (unsigned)daemon_uid);
	else
		snprintf(
		        why, len,
		        "uid %lld is not tileopsd's uid (%u) or root, and none of its %d groups is "
		        "allow_group%s (gid %u)",
		        (long long)p->uid, (unsigned)daemon_uid, p->n_groups, group,
		        (unsigned)allow_gid);
	return 0;
}
