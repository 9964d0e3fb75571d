/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Files from outside (configurations, cluster files, traces, captures):
 * opened without blocking, so that a FIFO or a device cannot hang the
 * reader, and refused unless regular; lines read with a bound, so that a
 * file with no newline cannot grow memory without end.
 */
#ifndef KVSS_FILEIO_H
#define KVSS_FILEIO_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/**
 * Open @p path for reading: without blocking (O_NONBLOCK, so a FIFO with
 * no writer does not wait), then refused unless it is a regular file, then
 * read as usual. @return the stream, or NULL with one line in @p err
 * ("PATH: not a regular file (a FIFO)", "PATH: cannot read: No such file or
 * directory").
 */
FILE *fileio_open(const char *path, char *err, size_t errlen);

/**
 * getline() with a bound: a line (with its newline) of more than @p max
 * bytes is not read to its end. @return its length; -1 at the end of the
 * file; -2 when it passes @p max (errno EFBIG) or memory runs out (ENOMEM).
 */
ssize_t fileio_getline(char **line, size_t *cap, size_t max, FILE *f);

#endif
