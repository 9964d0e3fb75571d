/* SPDX-License-Identifier: BSD-3-Clause */
/* Files from outside, opened and read with bounds (fileio.h). */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *
kind(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	return "not a file";
}

FILE *
fileio_open(const char *path, char *err, size_t errlen)
{
	struct stat st;
	FILE *f;
	int fd, fl;

	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file (%s)", path, kind(st.st_mode));
		close(fd);
		return NULL;
	}
	/* A regular file never blocks; the stream reads it as usual. */
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	f = fdopen(fd, "r");
	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
	}
	return f;
}

ssize_t
fileio_getline(char **line, size_t *cap, size_t max, FILE *f)
{
	ssize_t rc;
	size_t n = 0;
	int c;

	flockfile(f);
	while ((c = getc_unlocked(f)) != EOF) {
		if (n == max) {
			errno = EFBIG;
			rc = -2;
			goto out;
		}
		/* Room for this byte and the NUL: at most max + 1 bytes in all. */
		if (n + 2 > *cap) {
			size_t want = *cap ? 2 * *cap : 256;
			char *p;

			if (want > max + 1)
				want = max + 1;
			p = realloc(*line, want);
			if (p == NULL) {
				errno = ENOMEM;
				rc = -2;
				goto out;
			}
			*line = p;
			*cap = want;
		}
		(*line)[n++] = (char)c;
		if (c == '\n')
			break;
	}
	if (n == 0) {
		rc = -1;
		goto out;
	}
	(*line)[n] = '\0';
	rc = (ssize_t)n;
out:
	funlockfile(f);
	return rc;
}
