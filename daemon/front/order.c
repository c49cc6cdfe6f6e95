/* order.c - requests in seq order (see order.h). */
#include "order.h"

#include <stddef.h>

int session_hold(session *s, held_request *h)
{
	held_request **pp = &s->held;
	while (*pp && (*pp)->seq < h->seq)
		pp = &(*pp)->next;
	if (*pp && (*pp)->seq == h->seq)
		return -1;
	h->next = *pp;
	*pp = h;
	s->n_held++;
	return 0;
}

held_request *session_next_ready(session *s)
{
	held_request *h = s->held;
	if (!h || h->seq != s->next_seq)
		return NULL;
	s->held = h->next;
	h->next = NULL;
	s->n_held--;
	return h;
}
