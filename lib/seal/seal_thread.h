/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Each thread's sealing state (seal_thread.c), for seal.c alone: the rest
 * of the project calls seal.h.
 */
#ifndef KVSS_SEAL_THREAD_H
#define KVSS_SEAL_THREAD_H

#include <stdbool.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "seal.h"

/** This thread's AES-256-GCM context (cipher and nonce length set), or NULL. */
EVP_CIPHER_CTX *seal_thread_gcm(void);

/**
 * The key seal_key_with_org() made last on this thread from @p in
 * (master key || organization key) into @p out: true, or false when it
 * has none kept for exactly those bytes.
 */
bool seal_thread_org_get(const uint8_t in[2 * SEAL_KEY_LEN], struct seal_key *out);

/** Keep @p out as what @p in makes (replacing what its place held). */
void seal_thread_org_put(const uint8_t in[2 * SEAL_KEY_LEN], const struct seal_key *out);

#endif
