/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the sealing suites share: hexadecimal text to bytes (the
 * documents' values), and the documents' keys (bytes first, first + 1,
 * ...; the master key of PROTOCOL.md's golden vectors is 00..1f).
 */
#ifndef KVSS_TEST_SEAL_FIXTURE_H
#define KVSS_TEST_SEAL_FIXTURE_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>

#include "seal.h"

static inline void
unhex(const char *h, uint8_t *out, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned int v;

		cr_assert_eq(sscanf(h + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
}

static inline struct seal_key
doc_key(uint8_t first)
{
	uint8_t b[32];
	struct seal_key k;
	unsigned int i;

	for (i = 0; i < 32; i++)
		b[i] = (uint8_t)(first + i);
	cr_assert_eq(seal_key_from(&k, b), 0);
	return k;
}

#endif
