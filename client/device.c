/*
 * device.c - the devices the daemon serves: the list its HelloReply gave,
 * kept for the session's life, and the index checks of the calls that name
 * a device.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*
 * Keep HelloReply.devices. A daemon older than the field sends none: it
 * serves one device, which its `device` string names, so the list is that
 * one device and callers see no difference between the two daemons. The
 * index a tensor create names is the list's position, so an entry whose
 * index is not its position is a daemon we cannot follow.
 */
tileops_status tci_devices_store(struct tileops_client *c, const Tileops__HelloReply *h)
{
	size_t n = h->n_devices != 0 ? h->n_devices : 1;
	size_t i;

	c->devices = calloc(n, sizeof(*c->devices));
	if (c->devices == NULL)
		return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "out of memory for the device list");
	c->n_devices = (int)n;
	if (h->n_devices == 0) {
		c->devices[0].name = strdup(c->device);
		if (c->devices[0].name == NULL)
			return tci_error(TILEOPS_ERR_OUT_OF_MEMORY,
			                 "out of memory for the device list");
		return TILEOPS_OK;
	}
	for (i = 0; i < n; i++) {
		const Tileops__DeviceInfo *d = h->devices[i];

		if (d->index != i)
			return tci_error(TILEOPS_ERR_PROTOCOL,
			                 "tileopsd's HelloReply lists device index %u at position "
			                 "%zu, expected %zu",
			                 d->index, i, i);
		c->devices[i].index = d->index;
		c->devices[i].ordinal = d->ordinal;
		c->devices[i].memory_bytes = d->memory_bytes;
		c->devices[i].name = strdup(d->name != NULL ? d->name : "");
		if (c->devices[i].name == NULL)
			return tci_error(TILEOPS_ERR_OUT_OF_MEMORY,
			                 "out of memory for the device list");
	}
	return TILEOPS_OK;
}

void tci_devices_free(struct tileops_client *c)
{
	for (int i = 0; i < c->n_devices; i++)
		free((char *)c->devices[i].name);
	free(c->devices);
	c->devices = NULL;
	c->n_devices = 0;
}

tileops_status tci_device_check(const char *call, const struct tileops_client *c, int device)
{
	if (device < 0 || device >= c->n_devices)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "%s: device %d is out of range: tileopsd serves %d device%s "
		                 "(0..%d)",
		                 call, device, c->n_devices, c->n_devices == 1 ? "" : "s",
		                 c->n_devices - 1);
	return TILEOPS_OK;
}

TILEOPS_API int tileops_device_count(tileops_client *c)
{
	return c != NULL ? c->n_devices : 0;
}

TILEOPS_API tileops_status tileops_device_info_get(tileops_client *c, int index,
                                                   tileops_device_info *out)
{
	tileops_status st;

	if (c == NULL || out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "device_info_get: %s is NULL",
		                 c == NULL ? "client" : "out");
	if ((st = tci_device_check("device_info_get", c, index)) != TILEOPS_OK)
		return st;
	*out = c->devices[index];
	return TILEOPS_OK;
}
