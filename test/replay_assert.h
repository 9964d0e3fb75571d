/* SPDX-License-Identifier: BSD-3-Clause */
/* For the Criterion tests over the replay system (app/trace/replay.h). */
#ifndef KVSS_TEST_REPLAY_ASSERT_H
#define KVSS_TEST_REPLAY_ASSERT_H

#include <criterion/criterion.h>
#include <inttypes.h>

#include "replay.h"

/* No protocol error, no wrong byte, and the shards hold what the driver accounts for. */
static inline void
assert_clean(struct replay *r)
{
	struct replay_stats st;

	replay_stats(r, &st);
	cr_assert_eq(st.protocol_errors, 0, "%" PRIu64 " protocol errors", st.protocol_errors);
	cr_assert_eq(st.verify_failures, 0, "%" PRIu64 " verify failures", st.verify_failures);
	cr_assert_eq(st.unaccounted_tokens, 0, "the shard holds %" PRIu64 " tokens more or less "
		     "than the driver accounts for", st.unaccounted_tokens);
}

#endif
