/* SPDX-License-Identifier: BSD-3-Clause */
/* A shard's control messages waiting for its stream's window (driver_priv.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "driver_priv.h"

int
drv_ctlq_push(struct drv_ctlq *q, const uint8_t *p, uint32_t len, uint64_t batch_no)
{
	struct drv_ctl_msg *m = malloc(sizeof(*m) + len);

	if (m == NULL)
		return -ENOMEM;
	m->next = NULL;
	m->batch_no = batch_no;
	m->len = len;
	memcpy(m->p, p, len);
	if (q->tail != NULL)
		q->tail->next = m;
	else
		q->head = m;
	q->tail = m;
	q->backlog++;
	return 0;
}

int
drv_ctlq_close(struct drv_ctlq *q)
{
	if (!q->open_on)
		return 0;
	q->open_on = false;
	if (q->open.count == 0)
		return 0;
	return drv_ctlq_push(q, q->open_buf, proto_build_end(&q->open), 0);
}

struct proto_builder *
drv_ctlq_open(struct drv_ctlq *q, const struct proto_hdr *h, uint32_t need, uint32_t cap)
{
	if (cap > sizeof(q->open_buf))
		cap = sizeof(q->open_buf);
	if (PROTO_HDR_LEN + need > cap)
		return NULL;
	if (q->open_on && (q->open.type != h->type || proto_build_room(&q->open) < need) &&
	    drv_ctlq_close(q) != 0)
		return NULL;
	if (!q->open_on) {
		if (proto_build_begin(&q->open, q->open_buf, cap, h) != 0)
			return NULL;
		q->open_on = true;
	}
	return &q->open;
}

struct drv_ctl_msg *
drv_ctlq_pop(struct drv_ctlq *q)
{
	struct drv_ctl_msg *m = q->head;

	if (m == NULL)
		return NULL;
	q->head = m->next;
	if (q->head == NULL)
		q->tail = NULL;
	q->backlog--;
	return m;
}

void
drv_ctlq_clear(struct drv_ctlq *q)
{
	struct drv_ctl_msg *m;

	while ((m = drv_ctlq_pop(q)) != NULL)
		free(m);
	q->open_on = false;
}
