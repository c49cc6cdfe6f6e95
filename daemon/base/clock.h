/*
 * clock.h - the daemon's one clock: CLOCK_MONOTONIC, in microseconds or
 * seconds. Any thread.
 */
#ifndef TILEOPSD_CLOCK_H
#define TILEOPSD_CLOCK_H

#include <time.h>

static inline double clock_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static inline double clock_now_s(void)
{
	return clock_now_us() * 1e-6;
}

#endif
